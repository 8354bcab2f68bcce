/**
 * The TypeScript component package of tests/fixtures/languages/component used from a Python program and from a
 * YAML program, through the real CLI and the language hosts built from source (tests/languages/run.sh provides
 * them): `pulumi package add`, preview, up, a second up that changes nothing, destroy. Checks that each argument
 * shape (nested objects, an array of objects, a map, Input<string>) reaches the component, that a secret argument
 * stays secret on its way back, and what the CLI wrote into the program. No simulated hosts are involved.
 */
import { createHash } from "crypto";
import * as fs from "fs";
import * as path from "path";
import { changed, cliExport, destroy, expectOk, preview, stateResources, up } from "../integration/engine";
import {
    ComponentCopy,
    copyComponent,
    Language,
    LanguageProgram,
    prepareProgram,
    recordedPackages,
    removeWork,
    runCommand,
} from "../integration/languages";

const FIXTURES = path.join(__dirname, "..", "fixtures", "languages");
const TOKEN = "fixture-token-6f1d2c9a";
const seconds: Record<string, number> = {};

let component: ComponentCopy | undefined;

beforeAll(async () => {
    component = await copyComponent(path.join(FIXTURES, "component"));
    seconds["component: npm install"] = component.installSeconds;
}, 300_000);

afterAll(() => {
    if (component) removeWork(component);
    console.log(
        `seconds per step:\n${Object.entries(seconds)
            .map(([k, v]) => `  ${k.padEnd(28)} ${v.toFixed(1)}`)
            .join("\n")}`,
    );
});

/** What the component creates, by logical name, in every language. */
const CREATED = ["create greeter", "create greeter-echo", "create greeter-password"];

describe.each<[Language]>([["python"], ["yaml"]])("the component package from a %s program", (language) => {
    let lp: LanguageProgram | undefined;

    test("pulumi package add records the component's folder in Pulumi.yaml", async () => {
        if (!component) throw new Error("no component copy: its npm install failed");
        lp = await prepareProgram({
            component,
            programDir: path.join(FIXTURES, language),
            stackName: "fixture",
            config: { name: { value: language }, token: { value: TOKEN, secret: true } },
        });
        for (const [k, v] of Object.entries(lp.seconds)) seconds[`${language}: ${k}`] = v;
        expect(recordedPackages(lp)).toEqual({ "component-fixture": "../component" });
        if (language === "yaml") {
            // YAML has no SDK: a record of the package's name and version
            expect(fs.readFileSync(path.join(lp.project.dir, "sdks", "component-fixture", "component-fixture-0.1.0.yaml"), "utf8")).toMatch(
                /^name: component-fixture$/m,
            );
        }
        if (language === "python") {
            // the generated SDK, installed into the program's venv from the folder requirements.txt names
            const sdk = path.join(lp.project.dir, "sdks", "component-fixture");
            expect(fs.existsSync(path.join(sdk, "pulumi_component_fixture", "greeter.py"))).toBe(true);
            expect(fs.readFileSync(path.join(sdk, "pulumi_component_fixture", "_inputs.py"), "utf8")).toMatch(/class EndpointArgs/);
            expect(fs.readFileSync(path.join(lp.project.dir, "requirements.txt"), "utf8")).toMatch(/sdks\/component-fixture/);
            const imported = await runCommand(
                ["venv/bin/python", "-c", "import pulumi_component_fixture as f; print(f.Greeter.__name__)"],
                lp.project.dir,
                process.env,
                60_000,
            );
            expect(imported.output.trim()).toBe("Greeter");
        }
    }, 600_000);

    test("preview plans the component and its two children", async () => {
        if (!lp) throw new Error("no program: package add failed");
        const r = expectOk(await preview(lp.project));
        seconds[`${language}: preview`] = r.seconds;
        expect(changed(r)).toEqual(CREATED);
    }, 300_000);

    test("up creates them; every argument reached the component; the secret comes back secret", async () => {
        if (!lp) throw new Error("no program: package add failed");
        const r = expectOk(await up(lp.project));
        seconds[`${language}: up`] = r.seconds;
        expect(changed(r)).toEqual(CREATED);
        expect(r.outputs.greeting).toBe(
            `hello ${language}; endpoints 10.231.0.11:8000,10.231.0.12:8001; labels team=inference,tier=test; token ${TOKEN.length} chars`,
        );
        expect(r.outputs.endpointCount).toBe(2);
        expect(r.outputs.tokenSha256).toBe(createHash("sha256").update(TOKEN).digest("hex"));
        expect(String(r.outputs.password)).toMatch(/^[A-Za-z0-9]{24}$/);
        // as an operator sees them: the token's digest is secret only if the token arrived as a secret
        const shown = await runCommand(
            ["pulumi", "stack", "output", "--json"],
            lp.project.dir,
            { ...process.env, ...lp.project.stack.workspace.envVars },
            60_000,
        );
        expect(JSON.parse(shown.output)).toMatchObject({ password: "[secret]", tokenSha256: "[secret]", endpointCount: 2 });
        const state = await cliExport(lp.project);
        expect(state).not.toContain(TOKEN);
        expect(state).not.toContain(String(r.outputs.password));
        expect((await stateResources(lp.project)).map((x) => x.type).sort()).toEqual([
            "command:local:Command",
            "random:index/randomPassword:RandomPassword",
        ]);
    }, 300_000);

    test("a second up changes nothing", async () => {
        if (!lp) throw new Error("no program: package add failed");
        const r = expectOk(await up(lp.project, { expectNoChanges: true }));
        seconds[`${language}: second up`] = r.seconds;
        expect(changed(r)).toEqual([]);
    }, 300_000);

    test("destroy deletes them and leaves no resource in the state", async () => {
        if (!lp) throw new Error("no program: package add failed");
        const r = expectOk(await destroy(lp.project));
        seconds[`${language}: destroy`] = r.seconds;
        expect(changed(r)).toEqual(CREATED.map((c) => c.replace("create", "delete")));
        expect(await stateResources(lp.project)).toEqual([]);
    }, 300_000);
});

/**
 * The repository's own component package (package/: VllmCluster) added to the examples a user copies
 * (examples/python, examples/yaml) with `pulumi package add`, through the real CLI and the language hosts built from
 * source (tests/languages/run.sh provides them): what the CLI writes into each program, a preview that plans the
 * cluster as the TypeScript stack program makes it (the component and every child `create`, by the names the local
 * stack's graph has under Pulumi's mocks), the same inputs for every resource from Python as from YAML, and a bad
 * argument refused naming its key.
 *
 * Preview only, no hosts: a preview of VllmCluster runs no command on a host and opens no ssh connection (a stand-in
 * `ssh` first on PATH records every call and connects nowhere; none may come). It reads the TLS certificate and key
 * (throwaway ones made here); the ssh key and known_hosts file the config names do not exist. `up` of the same
 * cluster is what the integration tests run on the simulated hosts from the TypeScript stack program.
 */
import * as fs from "fs";
import * as path from "path";
import { OpResult, changed, expectOk, preview } from "../integration/engine";
import {
    ComponentCopy,
    ConfigValue,
    Language,
    LanguageProgram,
    copyComponent,
    prepareProgram,
    recordedPackages,
    removeWork,
    runCommand,
} from "../integration/languages";
import { runStack } from "../unit/harness";

const ROOT = path.join(__dirname, "..", "..");
const EXAMPLES = path.join(ROOT, "examples");
const seconds: Record<string, number> = {};

let component: ComponentCopy | undefined;
let config: Record<string, ConfigValue> = {};
/** The stand-in `ssh`: its folder (first on PATH) and the file it appends each call's arguments to. */
let spy = { dir: "", calls: "" };

beforeAll(async () => {
    // the package as a checkout has it: its folder, the code beside it, the checkout's npm packages
    component = await copyComponent(path.join(ROOT, "package"), {
        checkoutName: "vllm-cluster",
        siblings: ["components", "infra"],
        nodeModules: path.join(ROOT, "node_modules"),
    });
    seconds["package: npm install"] = component.installSeconds;
    const files = path.join(component.workDir, "files");
    fs.mkdirSync(files);
    const tls = await runCommand(
        [
            "openssl",
            ...["req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes", "-days", "1"],
            ...["-subj", "/CN=vllm-cluster-example", "-keyout", "api-key.pem", "-out", "api-cert.pem"],
        ],
        files,
        process.env,
        60_000,
    );
    if (tls.code !== 0) throw new Error(`openssl could not make the throwaway TLS files:\n${tls.output}`);
    fs.chmodSync(path.join(files, "api-key.pem"), 0o600);
    config = {
        tlsCertFile: { value: path.join(files, "api-cert.pem") },
        tlsKeyFile: { value: path.join(files, "api-key.pem") },
        sshPrivateKeyPath: { value: path.join(files, "id_ed25519") },
        sshKnownHostsFile: { value: path.join(files, "known_hosts") },
    };
    spy = { dir: path.join(component.workDir, "spy"), calls: path.join(component.workDir, "spy", "calls.log") };
    fs.mkdirSync(spy.dir);
    fs.writeFileSync(spy.calls, "");
    fs.writeFileSync(
        path.join(spy.dir, "ssh"),
        `#!/bin/sh\nprintf '%s\\n' "$*" >>'${spy.calls}'\necho 'ssh: the test lets no ssh connect' >&2\nexit 255\n`,
        { mode: 0o755 },
    );
}, 300_000);

afterAll(() => {
    if (component) removeWork(component);
    console.log(
        `seconds per step:\n${Object.entries(seconds)
            .map(([k, v]) => `  ${k.padEnd(48)} ${v.toFixed(1)}`)
            .join("\n")}`,
    );
});

/** What the TypeScript stack program plans for the local stack: every resource under Pulumi's mocks, but providers. */
async function plannedByTypeScript(): Promise<string[]> {
    const run = await runStack("local");
    const children = run.resources.filter((r) => !r.type.startsWith("pulumi:providers:")).map((r) => r.name);
    return ["vllm", ...new Set(children)].map((n) => `create ${n}`).sort();
}

/**
 * What a preview's steps would register, by type and name: the inputs as the engine shows them (secrets as
 * "[secret]", unknowns as placeholders), without the stack and the default providers (which take the project's
 * config, named after the project).
 */
function plannedInputs(r: OpResult): Record<string, unknown> {
    const planned: Record<string, unknown> = {};
    for (const e of r.events) {
        const m = e.resourcePreEvent?.metadata;
        if (!m || m.type === "pulumi:pulumi:Stack" || /::default(_[0-9_]+)?$/.test(m.urn)) continue;
        planned[`${m.type}::${m.urn.split("::").pop()}`] = m.new?.inputs;
    }
    return planned;
}

/** The stack's outputs as the preview's last step for the stack shows them. */
function stackOutputs(r: OpResult): Record<string, unknown> | undefined {
    const steps = r.events.map((e) => e.resOutputsEvent?.metadata).filter((m) => m?.type === "pulumi:pulumi:Stack");
    return steps.pop()?.new?.outputs;
}

/** Replaces `from` (which must occur exactly once) in the program copy's file; returns what puts it back. */
function edit(file: string, from: string, to: string): () => void {
    const text = fs.readFileSync(file, "utf8");
    if (text.split(from).length !== 2) throw new Error(`${file}: expected ${JSON.stringify(from)} exactly once`);
    fs.writeFileSync(file, text.replace(from, to));
    return () => fs.writeFileSync(file, text);
}

const spyCalls = () => fs.readFileSync(spy.calls, "utf8").split("\n").filter(Boolean);

/** Each language's file that declares the cluster, and how a bad argument is written in it. */
const BAD: Record<Language, { file: string; cases: [string, string, string, RegExp][] }> = {
    python: {
        file: "__main__.py",
        cases: [
            ["serve.port 70000", "port=8000,", "port=70000,", /serve\.port: 70000 is out of range 1\.\.65535/],
            // the SDK's input class refuses it before the component sees it
            [
                "a node without fabricIp",
                '            fabric_ip="10.232.0.12",\n',
                "",
                /missing 1 required keyword-only argument: 'fabric_ip'/,
            ],
        ],
    },
    yaml: {
        file: "Pulumi.yaml",
        cases: [
            ["serve.port 70000", "port: 8000\n", "port: 70000\n", /serve\.port: 70000 is out of range 1\.\.65535/],
            // the YAML host checks the properties against the package's schema
            ["a node without fabricIp", "          fabricIp: 10.232.0.12\n", "", /fabricIp: Missing required property 'fabricIp'/],
        ],
    },
};

const plans: Partial<Record<Language, Record<string, unknown>>> = {};

describe.each<[Language]>([["python"], ["yaml"]])("VllmCluster from the %s example", (language) => {
    let lp: LanguageProgram | undefined;

    test("pulumi package add <checkout>/package records the package and makes what the program imports", async () => {
        if (!component) throw new Error("no package copy: its npm install failed");
        lp = await prepareProgram({
            component,
            programDir: path.join(EXAMPLES, language),
            stackName: "example",
            config,
            env: { PATH: `${spy.dir}:${process.env.PATH ?? ""}` },
        });
        for (const [k, v] of Object.entries(lp.seconds)) seconds[`${language}: ${k}`] = v;
        expect(recordedPackages(lp)).toEqual({ "vllm-cluster": "../vllm-cluster/package" });
        if (language === "yaml") {
            expect(fs.readFileSync(path.join(lp.project.dir, "sdks", "vllm-cluster", "vllm-cluster-0.1.0.yaml"), "utf8")).toMatch(
                /^name: vllm-cluster$/m,
            );
        }
        if (language === "python") {
            const imported = await runCommand(
                ["venv/bin/python", "-c", "import pulumi_vllm_cluster as v; print(v.VllmCluster.__name__, v.NodeOptionsArgs.__name__)"],
                lp.project.dir,
                process.env,
                60_000,
            );
            expect(imported.output.trim()).toBe("VllmCluster NodeOptionsArgs");
        }
    }, 600_000);

    test("preview plans the component and every child the TypeScript program makes, all create, with no ssh", async () => {
        if (!lp) throw new Error("no program: package add failed");
        const expected = await plannedByTypeScript();
        const r = expectOk(await preview(lp.project));
        seconds[`${language}: preview`] = r.seconds;
        expect(changed(r)).toEqual(expected);
        expect(expected).toEqual(
            expect.arrayContaining(
                ["vllm", "spark-1", "spark-2", "image", "roster", "ray-head", "ray-worker-spark-2", "serve"].map((n) => `create ${n}`),
            ),
        );
        // the program's exports, as far as a preview knows them
        expect(stackOutputs(r)).toMatchObject({
            servedModelName: "tiny-qwen2",
            rayDashboard: "ssh -L 8265:127.0.0.1:8265 root@10.231.0.11",
        });
        expect(spyCalls()).toEqual([]);
        plans[language] = plannedInputs(r);
    }, 300_000);

    test.each(BAD[language].cases)(
        "%s fails the preview naming the key, and nothing under the cluster is planned",
        async (what, from, to, error) => {
            if (!lp) throw new Error("no program: package add failed");
            const restore = edit(path.join(lp.project.dir, BAD[language].file), from, to);
            try {
                const r = await preview(lp.project);
                seconds[`${language}: preview refused (${what})`] = r.seconds;
                expect(r.ok).toBe(false);
                expect(`${r.error}\n${r.output}`).toMatch(error);
                expect(changed(r).filter((c) => c !== "create vllm")).toEqual([]);
            } finally {
                restore();
            }
            expect(spyCalls()).toEqual([]);
        },
        300_000,
    );
});

test("the Python and the YAML example plan the same inputs for every resource", () => {
    if (!plans.python || !plans.yaml) throw new Error("a preview above failed");
    expect(Object.keys(plans.python).length).toBeGreaterThan(20);
    expect(plans.python).toEqual(plans.yaml);
});

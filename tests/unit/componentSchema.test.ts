/**
 * What Pulumi 3.248.0 infers from a TypeScript component's `args` interface when the component is used as a
 * package from other languages (PulumiPlugin.yaml, `pulumi package add`), and which TypeScript it refuses, with the
 * SDK's error text: the rules a component's argument types must keep (tests/lib/componentSchema.ts runs the same
 * inference in-process). The fixture is the package tests/languages deploys from Python and YAML.
 */
import * as fs from "fs";
import * as os from "os";
import * as path from "path";
import { inferComponentSchema, PackageSchema } from "../lib/componentSchema";

const ROOT = path.join(__dirname, "..", "..");
const FIXTURE = path.join(ROOT, "tests", "fixtures", "languages", "component");

describe("the fixture component package's inferred schema", () => {
    let schema: PackageSchema;
    beforeAll(() => {
        schema = inferComponentSchema(FIXTURE, ["Greeter"]);
    }, 60_000);

    test("one component named by the package, its docs from JSDoc", () => {
        expect(schema.name).toBe("component-fixture");
        expect(schema.version).toBe("0.1.0");
        expect(Object.keys(schema.resources)).toEqual(["component-fixture:index:Greeter"]);
        const greeter = schema.resources["component-fixture:index:Greeter"];
        expect(greeter.isComponent).toBe(true);
        expect(greeter.description).toBe("Greets `name` through a local command and makes a password.");
        expect(greeter.inputProperties.name.description).toBe("Who is greeted.");
    });

    test("Input<T> stays an input; a plain TypeScript type becomes a plain (non-Input) property", () => {
        const inputs = schema.resources["component-fixture:index:Greeter"].inputProperties;
        expect(inputs.name).toMatchObject({ type: "string" });
        expect(inputs.name.plain).toBeUndefined();
        expect(inputs.token.plain).toBeUndefined();
        expect(inputs.endpoints).toMatchObject({
            type: "array",
            plain: true,
            items: { $ref: "#/types/component-fixture:index:Endpoint", plain: true },
        });
        expect(inputs.labels).toMatchObject({ type: "object", optional: true, plain: true, additionalProperties: { type: "string" } });
        expect(inputs.labels.additionalProperties?.plain).toBeUndefined();
        expect(inputs.password).toMatchObject({ $ref: "#/types/component-fixture:index:PasswordPolicy", plain: true });
        expect(schema.resources["component-fixture:index:Greeter"].requiredInputs?.sort()).toEqual([
            "endpoints",
            "name",
            "password",
            "token",
        ]);
    });

    test("nested interfaces become named object types; TypeScript's number is the schema's number", () => {
        expect(schema.types?.["component-fixture:index:Endpoint"]).toMatchObject({
            type: "object",
            properties: { host: { type: "string" }, port: { type: "number", plain: true } },
            required: ["host", "port"],
        });
        expect(schema.types?.["component-fixture:index:PasswordPolicy"]?.properties?.special).toMatchObject({
            type: "boolean",
            optional: true,
        });
    });

    test("the public Output fields are the outputs (no secret marking in the schema: secrecy is a runtime property)", () => {
        const c = schema.resources["component-fixture:index:Greeter"];
        expect(c.properties).toEqual({
            greeting: expect.objectContaining({ type: "string" }),
            password: expect.objectContaining({ type: "string" }),
            tokenSha256: expect.objectContaining({ type: "string" }),
            endpointCount: expect.objectContaining({ type: "number" }),
        });
        expect(JSON.stringify(schema)).not.toMatch(/"secret"/);
    });
});

/** A one-component package whose Args interface has `body` as its members, in a temp folder. */
function packageWith(body: string, argsDecl = `export interface Args { ${body} }`): string {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), "vcl-schema-"));
    fs.symlinkSync(path.join(ROOT, "node_modules"), path.join(dir, "node_modules"));
    fs.writeFileSync(path.join(dir, "package.json"), JSON.stringify({ name: "probe", version: "1.0.0", main: "index.ts" }));
    fs.writeFileSync(
        path.join(dir, "tsconfig.json"),
        JSON.stringify({
            compilerOptions: { strict: true, target: "ES2022", module: "commonjs", moduleResolution: "node", skipLibCheck: true },
            files: ["index.ts"],
        }),
    );
    fs.writeFileSync(
        path.join(dir, "index.ts"),
        [
            `import * as pulumi from "@pulumi/pulumi";`,
            `export enum Backend { Ray = "ray", Native = "native" }`,
            `export interface Inner { a: string }`,
            argsDecl,
            `export class C extends pulumi.ComponentResource {`,
            `    constructor(name: string, args: Args, opts?: pulumi.ComponentResourceOptions) { super("probe:index:C", name, {}, opts); void args; }`,
            `}`,
        ].join("\n"),
    );
    return dir;
}

function inferred(body: string, argsDecl?: string): PackageSchema {
    const dir = packageWith(body, argsDecl);
    try {
        return inferComponentSchema(dir, ["C"]);
    } finally {
        fs.rmSync(dir, { recursive: true, force: true });
    }
}

describe("TypeScript an args interface may not use (each refused with the SDK's error)", () => {
    test.each([
        [
            "a string-literal union",
            `backend: "ray" | "native";`,
            `Union types are not supported for component 'C' property 'Args.backend': type '"ray" | "native"'`,
        ],
        [
            "a union with null",
            `x: string | null;`,
            `Union types are not supported for component 'C' property 'Args.x': type 'string | null'`,
        ],
        [
            "an anonymous object type",
            `ssh: { user: string };`,
            `Unsupported type for component 'C' property 'Args.ssh': type '{ user: string; }'`,
        ],
        ["a readonly array", `xs: readonly string[];`, `Unsupported type for component 'C' property 'Args.xs': type 'readonly string[]'`],
        ["a function", `onReady: () => void;`, `Unsupported type for component 'C' property 'Args.onReady': type '() => void'`],
    ])(
        "%s",
        (_what, body, error) => {
            expect(() => inferred(body)).toThrow(error);
        },
        60_000,
    );

    test("a type alias as the args type", () => {
        expect(() => inferred("", "export type Args = { a: string };")).toThrow(
            "Component 'C' constructor 'args' parameter must be an interface",
        );
    }, 60_000);
});

test("what to write instead: an enum, an optional property, a named interface, Record maps, Input arrays", () => {
    const s = inferred(
        `backend: Backend; x?: string; ssh: Inner; labels: Record<string, string>; xs: pulumi.Input<pulumi.Input<string>[]>;`,
    );
    const inputs = s.resources["probe:index:C"].inputProperties;
    expect(inputs.backend).toMatchObject({ $ref: "#/types/probe:index:Backend", plain: true });
    expect(s.types?.["probe:index:Backend"]).toMatchObject({ type: "string", enum: [{ value: "ray" }, { value: "native" }] });
    expect(inputs.x).toMatchObject({ type: "string", optional: true });
    expect(inputs.ssh).toMatchObject({ $ref: "#/types/probe:index:Inner" });
    expect(inputs.labels).toMatchObject({ type: "object", additionalProperties: { type: "string" } });
    expect(inputs.xs).toEqual({ type: "array", items: { type: "string" } });
}, 60_000);

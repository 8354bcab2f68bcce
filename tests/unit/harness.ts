/**
 * Runs the program against Pulumi's mocks and records every resource as the engine would get it: type, name,
 * resolved inputs, the mock's ID and outputs, and its options (parent, provider, dependsOn, deleteBeforeReplace,
 * replaceOnChanges, additionalSecretOutputs). Public SDK APIs only: `setMocks` for registrations, a stack
 * transformation for options; dynamic providers are serialized for real (it works in jest's node environment).
 * Dependencies are data: the mocks hand out distinct values per resource, so a test states a wire by value (the
 * worker's label is the head container's ID), and a run with one resource's outputs changed (or unknown, in a
 * preview) shows which inputs are made from them.
 */
import * as pulumi from "@pulumi/pulumi";
import { createHash } from "crypto";
import * as fs from "fs";
import * as path from "path";
import { ClusterConfig, validateConfig } from "../../infra/config";
import { ClusterOutputs, buildCluster } from "../../infra/program";
import type { ServeTls } from "../../infra/tls";

// js-yaml ships with the toolchain (a dependency of the test tooling); typed locally to keep it a dev concern.
// eslint-disable-next-line @typescript-eslint/no-require-imports
const yaml = require("js-yaml") as { load(s: string): unknown };

export const PROJECT = "vllm-cluster";
export const MOCK_API_KEY = "MOCKAPIKEY0123456789abcdefghijklmnopqrstuvwxyzXYZ";
export const MOCK_RAY_TOKEN = "MOCKRAYTOKEN456789abcdefghijklmnopqrstuvwxyzXYZ01";
/** What every mocked preflight reports as the host's MemTotal: a GB10's 119.2 GiB as Linux sees it. */
export const MOCK_MEM_TOTAL_KIB = 125_000_000;

/** Options of a resource as given to its constructor; resources by logical name ("" for none). */
export interface Options {
    parent: string;
    dependsOn: string[];
    deleteBeforeReplace: boolean;
    replaceOnChanges: string[];
    additionalSecretOutputs: string[];
}

export interface Rec extends Options {
    type: string;
    name: string;
    custom: boolean;
    /** Resolved inputs as the engine gets them (secrets sentinel-wrapped), without the SDK's `__` keys. */
    inputs: Record<string, unknown>;
    /** The provider reference the engine gets, by the provider's logical name ("" for the default provider). */
    provider: string;
    /** The mock's ID and outputs ("" and {} while unknown). */
    id: string;
    outputs: Record<string, unknown>;
    /** A dynamic resource's provider as serialized for the engine (module text exporting `handler`). */
    serializedProvider?: string;
}

export interface Run {
    resources: Rec[];
    byName: Map<string, Rec>;
    outputs: ClusterOutputs;
    resolved: { endpoint: string; apiKey: string; clusterFingerprint: string; apiKeyIsSecret: boolean };
}

/** One resource's mock outputs differ: "changed" as if it had been replaced, "unknown" as in a preview creating it. */
export interface Variant {
    name: string;
    outputs: "changed" | "unknown";
}

const STACK_DIR = path.join(__dirname, "..", "..", "stacks");

/** What config validation refuses in `raw`, one line per problem (each names its key); none: []. */
export function problems(raw: unknown): string[] {
    try {
        validateConfig(raw);
    } catch (e) {
        return (e as Error).message
            .split("\n")
            .slice(1)
            .map((l) => l.replace(/^\s+- /, ""));
    }
    return [];
}

/** The raw `vllm-cluster:` config of a committed stack file, keys without the namespace. */
export function loadStackRaw(stack: string): Record<string, unknown> {
    const doc = yaml.load(fs.readFileSync(path.join(STACK_DIR, `Pulumi.${stack}.yaml`), "utf8")) as {
        config: Record<string, unknown>;
    };
    return Object.fromEntries(Object.entries(doc.config).map(([k, v]) => [k.replace(/^vllm-cluster:/, ""), v]));
}

export function loadStack(stack: string): ClusterConfig {
    return validateConfig(loadStackRaw(stack));
}

function hash(v: unknown): string {
    return createHash("sha256").update(JSON.stringify(v)).digest("hex").slice(0, 12);
}

/** `urn:pulumi:<stack>::<project>::<type chain>::<name>`, for a provider reference followed by `::<id>`. */
function nameOfUrn(urn: string | undefined): string {
    return urn?.split("::")[3] ?? "";
}

function withoutInternal(inputs: Record<string, unknown>): Record<string, unknown> {
    return Object.fromEntries(Object.entries(inputs ?? {}).filter(([k]) => !k.startsWith("__")));
}

/**
 * The mock's ID and outputs. Every value a resource hands on is its own and follows its inputs: container and
 * image IDs hash their inputs, each host's preflight reports its own architecture, the gate's fingerprint hashes
 * its script and triggers. So a downstream value names its source, and a replaced upstream (a new ID) changes what
 * it feeds. `salt` gives a resource outputs other than these.
 */
function mockState(args: pulumi.runtime.MockResourceArgs, salt: string): { id: string; state: Record<string, unknown> } {
    const inputs = withoutInternal(args.inputs);
    const h = (v: unknown) => hash([v, salt]);
    switch (args.type) {
        case "docker:index/container:Container":
            return { id: `ctr-${h(inputs)}`, state: inputs };
        case "docker:index/image:Image":
            // image.build: the built image's ID (repoDigest when nothing is pushed) follows the build's inputs
            return { id: String(inputs.imageName), state: { ...inputs, repoDigest: `sha256:${h(inputs)}` } };
        case "pulumi-nodejs:dynamic:Resource":
            if ("waitScript" in inputs) {
                // HostCheck: the gate's fingerprint follows its wait script and triggers, as a re-formed cluster would
                const report = { fingerprint: h([inputs.waitScript, inputs.triggers]), nodes: {}, gpus: 0 };
                const result = JSON.stringify(args.name.endsWith("-probe") ? report : { ready: true });
                return { id: `${args.name}-${h(inputs)}`, state: { ...inputs, result, healthy: true } };
            }
            if ("members" in inputs && "ref" in inputs) {
                // ImageChain: every member holds the source's image
                const sourceId = `sha256:${h([inputs.ref, inputs.source])}`;
                const members = inputs.members as { node: string }[];
                const imageIds = Object.fromEntries(members.map((m) => [m.node, sourceId]));
                return { id: `${inputs.ref}@chain`, state: { ...inputs, sourceId, imageIds, copied: members.map((m) => m.node) } };
            }
            if ("members" in inputs && "hostPath" in inputs) {
                // ModelChain: every member holds the source's model
                const digest = `sha256:${h([inputs.hostPath, inputs.source])}`;
                const members = inputs.members as { node: string }[];
                const digests = Object.fromEntries(members.map((m) => [m.node, digest]));
                const copied = members.map((m) => m.node);
                return { id: `${inputs.hostPath}@chain`, state: { ...inputs, digest, files: 1, bytes: 1, digests, copied } };
            }
            if ("members" in inputs) {
                // Roster: its version is the member names
                const members = inputs.members as { name: string }[];
                const version = members
                    .map((m) => m.name)
                    .sort()
                    .join(",");
                return { id: args.name, state: { ...inputs, version, unreachable: [] } };
            }
            if ("repo" in inputs && "script" in inputs) {
                // HubModel: the commit its revision names (a full hash names itself)
                const rev = String(inputs.revision);
                const commit = /^[0-9a-f]{40}$/.test(rev) ? rev : createHash("sha1").update(rev).digest("hex");
                return { id: `${inputs.node}:${inputs.repo}`, state: { ...inputs, commit, files: 1, bytes: 1, fetched: [] } };
            }
            if ("keyHash" in inputs) {
                // KeyFile: installed where its install script puts it
                return { id: args.name, state: { ...inputs, path: `/${args.name}`, intact: true } };
            }
            // ImagePresence: its ID, and its facts line (ID, store, content)
            return {
                id: `${inputs.node}/${inputs.ref}`,
                state: { ...inputs, imageId: `sha256:${h(inputs)}`, image: `sha256:${h(inputs)} classic sha256:${h(inputs.ref)}` },
            };
        case "random:index/randomPassword:RandomPassword":
            return { id: args.name, state: { ...inputs, result: `${args.name === "ray-token" ? MOCK_RAY_TOKEN : MOCK_API_KEY}${salt}` } };
        case "command:local:Command": {
            let stdout = "";
            if (args.name.endsWith("-preflight")) {
                const node = args.name.replace(/-preflight$/, "");
                stdout = JSON.stringify({
                    node,
                    arch: `aarch64-${h(node)}`,
                    dockerVersion: "28.0.0",
                    gpusSeen: 1,
                    memTotalKib: MOCK_MEM_TOTAL_KIB,
                });
            }
            return { id: `${args.name}-${h(inputs)}`, state: { ...inputs, stdout, stderr: "" } };
        }
        default:
            return { id: `${args.name}-id${salt}`, state: inputs };
    }
}

/** An input's value: a promise awaited, an output resolved. */
function value<T>(o: pulumi.Input<T>): Promise<T> {
    return pulumi.Output.isInstance(o) ? new Promise((r) => o.apply((v) => r(v))) : Promise.resolve(o);
}

async function nameOf(r: pulumi.Input<pulumi.Resource> | undefined): Promise<string> {
    return r === undefined ? "" : nameOfUrn(await value((await value(r)).urn));
}

/** The options a stack transformation sees, resources resolved to their logical names through their URNs. */
async function options(opts: pulumi.CustomResourceOptions): Promise<Options> {
    const deps = await value(opts.dependsOn);
    return {
        parent: await nameOf(opts.parent),
        dependsOn: (await Promise.all((Array.isArray(deps) ? deps : deps ? [deps] : []).map(nameOf))).sort(),
        deleteBeforeReplace: opts.deleteBeforeReplace ?? false,
        replaceOnChanges: opts.replaceOnChanges ?? [],
        additionalSecretOutputs: opts.additionalSecretOutputs ?? [],
    };
}

/** Records every registration through `setMocks`, `variant` changing one resource's outputs. */
async function setRecordingMocks(stack: string, records: Map<string, Omit<Rec, keyof Options>>, variant?: Variant) {
    const newResource = (args: pulumi.runtime.MockResourceArgs): pulumi.runtime.MockResourceResult => {
        const changed = args.name === variant?.name;
        const mock = changed && variant?.outputs === "unknown" ? { id: "", state: {} } : mockState(args, changed ? "~" : "");
        const provider = args.inputs.__provider;
        records.set(`${args.type}::${args.name}`, {
            type: args.type,
            name: args.name,
            custom: args.custom ?? false,
            inputs: withoutInternal(args.inputs),
            provider: nameOfUrn(args.provider),
            id: mock.id,
            outputs: mock.state,
            serializedProvider: typeof provider === "string" ? provider : undefined,
        });
        return { id: mock.id || undefined, state: mock.state };
    };
    await pulumi.runtime.setMocks({ newResource, call: (args) => args.inputs }, PROJECT, stack, variant?.outputs === "unknown");
}

/**
 * Runs `build` as a stack's program, a stack transformation collecting each resource's options, until every
 * registration is done.
 */
export async function runMocked(build: () => ClusterOutputs, stack: string, variant?: Variant): Promise<Run> {
    const records = new Map<string, Omit<Rec, keyof Options>>();
    await setRecordingMocks(stack, records, variant);
    const opts = new Map<string, Promise<Options>>();
    let outputs: ClusterOutputs | undefined;
    const exported = await pulumi.runtime.runInPulumiStack(async () => {
        // Not registerResourceTransform: it needs the engine's callback server, and setMocks turns transforms off.
        // A stack transformation needs the stack resource, hence runInPulumiStack.
        pulumi.runtime.registerStackTransformation((args) => {
            opts.set(`${args.type}::${args.name}`, options(args.opts));
            return undefined;
        });
        outputs = build();
        return outputs;
    });
    // Drains the RPC queue: every registration (and registerOutputs) has reached these mocks before the next run's.
    await pulumi.runtime.disconnect();
    const resources: Rec[] = [];
    for (const [key, rec] of records) {
        if (rec.type !== pulumi.runtime.rootPulumiStackTypeName) {
            resources.push({ ...rec, ...(await opts.get(key)!) });
        }
    }
    resources.sort((a, b) => a.name.localeCompare(b.name) || a.type.localeCompare(b.type));
    // The stack's outputs, resolved (undefined in a preview where one is unknown).
    const { endpoint, apiKey, clusterFingerprint } = (exported ?? {}) as Run["resolved"];
    const apiKeyIsSecret = await pulumi.isSecret(outputs!.apiKey);
    return {
        resources,
        byName: new Map(resources.map((r) => [r.name, r])),
        outputs: outputs!,
        resolved: { endpoint, apiKey, clusterFingerprint, apiKeyIsSecret },
    };
}

/** What loadTls would read for a stack with serve.tls (the files exist on the operator's machine, not here). */
export const TEST_TLS = {
    cert: "-----BEGIN CERTIFICATE-----\nMIIB-test-certificate\n-----END CERTIFICATE-----\n",
    key: "-----BEGIN PRIVATE KEY-----\nMIIE-test-tls-key\n-----END PRIVATE KEY-----\n",
};

/** TEST_TLS as loadTls returns it when the config sets serve.tls (call inside the mocked program). */
export function testTls(cfg: ClusterConfig): ServeTls {
    return cfg.serve.tls ? { cert: TEST_TLS.cert, key: pulumi.secret(TEST_TLS.key) } : undefined;
}

/**
 * A mocked resource as the hosts would answer it, for a program run under plain setMocks: its inputs as outputs, plus
 * the preflight's facts, the gate's fingerprint, readiness, an image ID and a generated secret.
 */
export function answerLikeHosts(a: pulumi.runtime.MockResourceArgs): { id: string; state: Record<string, unknown> } {
    const state: Record<string, unknown> = { ...a.inputs };
    if (a.name.endsWith("-preflight")) state.stdout = '{"arch":"x86_64"}';
    if (a.name.endsWith("-probe")) state.result = '{"fingerprint":"f00"}';
    if (a.name.endsWith("-readiness")) state.result = '{"ready":true}';
    if (a.type.startsWith("pulumi-nodejs:dynamic")) state.imageId = "sha256:1";
    if (a.type.startsWith("random:")) state.result = "k";
    return { id: `${a.name}-id`, state };
}

export function runStack(stack: string, cfg: ClusterConfig = loadStack(stack), variant?: Variant): Promise<Run> {
    return runMocked(() => buildCluster(cfg, stack, undefined, testTls(cfg)), stack, variant);
}

/** Resource name -> its input keys that hold an unknown (in a preview: made from an output not known yet). */
export function unknownInputs(run: Run): Record<string, string[]> {
    const unknown = (r: Rec) => Object.keys(r.inputs).filter((k) => pulumi.containsUnknowns(r.inputs[k]));
    return Object.fromEntries(run.resources.map((r) => [r.name, unknown(r)]).filter(([, keys]) => keys.length > 0));
}

/** Resource -> input key -> the resources that input is made from. */
export type PropertyDependencies = Record<string, Record<string, string[]>>;

/**
 * Per-property dependencies by value: for each custom resource X of `base`, a preview in which X is still to be
 * created (its ID and outputs unknown) leaves unknown exactly the inputs made from X's outputs.
 */
export async function dependenciesByValue(stack: string, cfg: ClusterConfig, base: Run): Promise<PropertyDependencies> {
    const deps: PropertyDependencies = {};
    for (const x of base.resources.filter((r) => r.custom && !r.type.startsWith("pulumi:providers:"))) {
        const unknown = unknownInputs(await runStack(stack, cfg, { name: x.name, outputs: "unknown" }));
        for (const [name, keys] of Object.entries(unknown)) {
            keys.forEach((k) => ((deps[name] ??= {})[k] ??= []).push(x.name));
        }
    }
    return deps;
}

/** Which resources appear, disappear, or get other inputs (what decides whether the engine sees a change). */
export function diffRuns(base: Run, next: Run): { added: string[]; removed: string[]; changed: string[] } {
    const inputs = (run: Run) => new Map(run.resources.map((r) => [r.name, JSON.stringify(r.inputs)]));
    const a = inputs(base);
    const b = inputs(next);
    return {
        added: [...b.keys()].filter((k) => !a.has(k)).sort(),
        removed: [...a.keys()].filter((k) => !b.has(k)).sort(),
        changed: [...b.keys()].filter((k) => a.has(k) && a.get(k) !== b.get(k)).sort(),
    };
}

export function deepClone<T>(v: T): T {
    return JSON.parse(JSON.stringify(v)) as T;
}

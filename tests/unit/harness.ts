/**
 * Runs the program against Pulumi mocks and records every registered resource with what the engine would see:
 * type, name, parent, provider, dependencies (also per property) and resolved inputs.
 */
import * as pulumi from "@pulumi/pulumi";
import { createHash } from "crypto";
import * as fs from "fs";
import * as path from "path";
import { ClusterConfig, validateConfig } from "../../infra/config";
import { ClusterOutputs, buildCluster } from "../../infra/program";

// Dynamic providers are serialized by inspecting the live function through the V8 inspector, which is not
// available inside jest's VM sandbox. The provider's behaviour is tested on its own (imageProvider.test.ts) and
// its serialization by the real CLI (e2e); here only its registration matters.
jest.mock("@pulumi/pulumi/runtime/closure/serializeClosure", () => ({
    serializeFunction: async () => ({
        text: "exports.handler = undefined; // serialized provider (mocked)",
        containsSecrets: false,
    }),
}));

// js-yaml ships with the toolchain (a dependency of the test tooling); typed locally to keep it a dev concern.
// eslint-disable-next-line @typescript-eslint/no-require-imports
const yaml = require("js-yaml") as { load(s: string): unknown };

export const PROJECT = "vllm-cluster";
export const MOCK_API_KEY = "MOCKAPIKEY0123456789abcdefghijklmnopqrstuvwxyzXYZ";

export interface Rec {
    type: string;
    name: string;
    custom: boolean;
    inputs: Record<string, unknown>;
    parent: string; // parent's logical name, "" at top level
    provider: string; // provider's logical name, "" for default/none
    dependencies: string[]; // logical names
    propertyDependencies: Record<string, string[]>;
    deleteBeforeReplace: boolean;
    additionalSecretOutputs: string[];
}

export interface Run {
    resources: Rec[];
    byName: Map<string, Rec>;
    outputs: ClusterOutputs;
    resolved: {
        endpoint: string;
        apiKey: string;
        clusterFingerprint: string;
        apiKeyIsSecret: boolean;
    };
}

const STACK_DIR = path.join(__dirname, "..", "..", "stacks");

/** The raw `vllm-cluster:` config of a committed stack file, keys without the namespace. */
export function loadStackRaw(stack: string): Record<string, unknown> {
    const doc = yaml.load(fs.readFileSync(path.join(STACK_DIR, `Pulumi.${stack}.yaml`), "utf8")) as {
        config: Record<string, unknown>;
    };
    const raw: Record<string, unknown> = {};
    for (const [k, v] of Object.entries(doc.config)) {
        raw[k.replace(/^vllm-cluster:/, "")] = v;
    }
    return raw;
}

export function loadStack(stack: string): ClusterConfig {
    return validateConfig(loadStackRaw(stack));
}

export function hash(v: unknown): string {
    return createHash("sha256").update(JSON.stringify(v)).digest("hex").slice(0, 12);
}

function nameOfUrn(urn: string): string {
    if (!urn) {
        return "";
    }
    // urn:pulumi:<stack>::<project>::<type chain>::<name>[::<id> for provider references]
    const parts = urn.split("::");
    return parts[3] ?? "";
}

function stripInternal(inputs: Record<string, unknown>): Record<string, unknown> {
    const out: Record<string, unknown> = {};
    for (const [k, v] of Object.entries(inputs ?? {})) {
        if (!k.startsWith("__")) {
            out[k] = v;
        }
    }
    return out;
}

/**
 * Mock outputs. IDs of containers hash their inputs, so a changed container gets a new ID the way a replaced
 * one does, and everything fed by that ID (readiness triggers) changes too, as in a real deployment.
 */
function mockState(args: pulumi.runtime.MockResourceArgs): { id: string; state: Record<string, unknown> } {
    const inputs = stripInternal(args.inputs);
    switch (args.type) {
        case "docker:index/container:Container":
            return { id: `ctr-${hash(inputs)}`, state: { ...inputs } };
        case "pulumi-nodejs:dynamic:Resource":
            if (inputs.waitScript !== undefined) {
                // HostCheck: the gate's fingerprint follows its wait script and triggers, as a re-formed cluster would
                const result = args.name.endsWith("-probe")
                    ? JSON.stringify({ fingerprint: hash([inputs.waitScript, inputs.triggers]), nodes: {}, gpus: 0 })
                    : JSON.stringify({ ready: true });
                return { id: args.name, state: { ...inputs, result, healthy: true } };
            }
            return {
                id: `${inputs.node}/${inputs.ref}`,
                state: { ...inputs, imageId: `sha256:${hash(inputs.ref)}` },
            };
        case "random:index/randomPassword:RandomPassword":
            return { id: args.name, state: { ...inputs, result: MOCK_API_KEY } };
        case "command:local:Command": {
            let stdout = "";
            if (args.name.endsWith("-preflight")) {
                stdout = JSON.stringify({
                    node: args.name.replace(/-preflight$/, ""),
                    arch: "aarch64",
                    dockerVersion: "28.0.0",
                    gpusSeen: 1,
                });
            } else if (args.name.endsWith("-probe")) {
                stdout = JSON.stringify({ fingerprint: hash([inputs.create, inputs.triggers]), nodes: {}, gpus: 0 });
            } else if (args.name.endsWith("-readiness")) {
                stdout = JSON.stringify({ ready: true });
            }
            return { id: args.name, state: { ...inputs, stdout, stderr: "" } };
        }
        default:
            return { id: `${args.name}-id`, state: { ...inputs } };
    }
}

function resolve<T>(o: pulumi.Output<T>): Promise<T> {
    return new Promise((r) => o.apply((v) => r(v)));
}

async function isSecret<T>(o: pulumi.Output<T>): Promise<boolean> {
    return (o as unknown as { isSecret: Promise<boolean> }).isSecret;
}

async function settle(count: () => number): Promise<void> {
    let last = -1;
    let stable = 0;
    for (let i = 0; i < 200 && stable < 3; i++) {
        await new Promise((r) => setTimeout(r, 10));
        const c = count();
        stable = c === last ? stable + 1 : 0;
        last = c;
    }
}

interface Meta {
    parent: string;
    provider: string;
    dependencies: string[];
    propertyDependencies: Record<string, string[]>;
    deleteBeforeReplace: boolean;
    additionalSecretOutputs: string[];
}

interface RegisterRequest {
    getType(): string;
    getName(): string;
    getParent(): string;
    getProvider(): string;
    getDependenciesList(): string[];
    getPropertydependenciesMap(): { forEach(cb: (v: { getUrnsList(): string[] }, k: string) => void): void };
    getDeletebeforereplace(): boolean;
    getAdditionalsecretoutputsList(): string[];
}

/** Sets fresh mocks, wraps the mock monitor to capture graph metadata, and records the whole program. */
export async function runMocked(build: () => ClusterOutputs, stack: string): Promise<Run> {
    const resources: Rec[] = [];
    const meta = new Map<string, Meta>();
    await pulumi.runtime.setMocks(
        {
            newResource(args) {
                const m = meta.get(`${args.type}::${args.name}`);
                const { id, state } = mockState(args);
                resources.push({
                    type: args.type,
                    name: args.name,
                    custom: args.custom ?? false,
                    inputs: stripInternal(args.inputs),
                    parent: m?.parent ?? "",
                    provider: m?.provider ?? "",
                    dependencies: m?.dependencies ?? [],
                    propertyDependencies: m?.propertyDependencies ?? {},
                    deleteBeforeReplace: m?.deleteBeforeReplace ?? false,
                    additionalSecretOutputs: m?.additionalSecretOutputs ?? [],
                });
                return { id, state };
            },
            call(args) {
                return args.inputs;
            },
        },
        PROJECT,
        stack,
        false,
    );
    const monitor = pulumi.runtime.getMonitor() as unknown as {
        registerResource(req: RegisterRequest, cb: unknown): unknown;
    };
    const original = monitor.registerResource.bind(monitor);
    monitor.registerResource = (req: RegisterRequest, cb: unknown) => {
        const propertyDependencies: Record<string, string[]> = {};
        req.getPropertydependenciesMap().forEach((v, k) => {
            propertyDependencies[k] = v.getUrnsList().map(nameOfUrn).sort();
        });
        meta.set(`${req.getType()}::${req.getName()}`, {
            parent: nameOfUrn(req.getParent()),
            provider: nameOfUrn(req.getProvider()),
            dependencies: req.getDependenciesList().map(nameOfUrn).sort(),
            propertyDependencies,
            deleteBeforeReplace: req.getDeletebeforereplace(),
            additionalSecretOutputs: req.getAdditionalsecretoutputsList(),
        });
        return original(req, cb);
    };

    const outputs = build();
    const [endpoint, apiKey, clusterFingerprint, apiKeyIsSecret] = await Promise.all([
        resolve(outputs.endpoint),
        resolve(outputs.apiKey),
        resolve(outputs.clusterFingerprint),
        isSecret(outputs.apiKey),
    ]);
    await settle(() => resources.length);
    resources.sort((a, b) => a.name.localeCompare(b.name) || a.type.localeCompare(b.type));
    return {
        resources,
        byName: new Map(resources.map((r) => [r.name, r])),
        outputs,
        resolved: { endpoint, apiKey, clusterFingerprint, apiKeyIsSecret },
    };
}

export function runStack(stack: string, cfg: ClusterConfig = loadStack(stack)): Promise<Run> {
    return runMocked(() => buildCluster(cfg, stack), stack);
}

/** Resource name -> stable JSON of its inputs (what decides whether the engine sees a change). */
export function inputsByName(run: Run): Map<string, string> {
    return new Map(run.resources.map((r) => [r.name, JSON.stringify(r.inputs)]));
}

export interface ChangeSet {
    added: string[];
    removed: string[];
    changed: string[];
}

export function diffRuns(base: Run, next: Run): ChangeSet {
    const a = inputsByName(base);
    const b = inputsByName(next);
    return {
        added: [...b.keys()].filter((k) => !a.has(k)).sort(),
        removed: [...a.keys()].filter((k) => !b.has(k)).sort(),
        changed: [...b.keys()].filter((k) => a.has(k) && a.get(k) !== b.get(k)).sort(),
    };
}

export function deepClone<T>(v: T): T {
    return JSON.parse(JSON.stringify(v)) as T;
}

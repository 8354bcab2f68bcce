// Runs the pack against the containers the program itself registers (the real program under Pulumi's mocks, its own
// builders and config validation), so a change on either side of the label and command contract fails here, not
// in a live preview.
import { PolicyPack, PolicyPackArgs, ResourceValidationPolicy, StackValidationPolicy } from "@pulumi/policy";
import "../../policies";
import { readFileSync } from "fs";
import { join } from "path";
import { validateConfig } from "../../infra/config";
import { loadStackRaw, runStack } from "../unit/harness";
import { NamedResource, Violation, clone, runResourcePolicy, runStackPolicy } from "./util";

// js-yaml ships with @pulumi/pulumi (which reads Pulumi.yaml with it) but has no type declarations.
// eslint-disable-next-line @typescript-eslint/no-require-imports
const yaml: { load(text: string): unknown } = require("js-yaml");

// Every policy of the pack as policies/index.ts assembles it (a new policy is in these tests without a change here):
// index.ts starts the policy server when it constructs the pack, so record the constructor's arguments instead.
jest.mock("@pulumi/policy", () => ({ ...jest.requireActual("@pulumi/policy"), PolicyPack: jest.fn() }));
const packPolicies = (jest.mocked(PolicyPack).mock.calls[0][1] as PolicyPackArgs).policies;
const resourcePolicies = packPolicies.filter((p): p is ResourceValidationPolicy => "validateResource" in p);
const stackPolicies = packPolicies.filter((p): p is StackValidationPolicy => "validateStack" in p);

type Raw = Record<string, any>; // eslint-disable-line @typescript-eslint/no-explicit-any

/**
 * The docker containers the program registers for a stack config (the committed `stack` file with `edit` applied),
 * as the pack sees them: the resolved inputs the engine would send.
 */
async function programContainers(stack: string, edit: (raw: Raw) => void = () => undefined): Promise<NamedResource[]> {
    const raw = loadStackRaw(stack) as Raw;
    edit(raw);
    const run = await runStack(stack, validateConfig(raw));
    return run.resources
        .filter((r) => r.type === "docker:index/container:Container")
        .map((r) => ({ name: r.name, props: clone(r.inputs) }));
}

const DIGEST = "@sha256:" + "e".repeat(64);
const pinned = (raw: Raw) => (raw.image.ref = `hellohal2064/vllm-qwen3.5-gb10${DIGEST}`);

async function runPack(stack: NamedResource[]): Promise<(Violation & { policy: string })[]> {
    const out: (Violation & { policy: string })[] = [];
    for (const p of resourcePolicies) {
        for (const r of stack) out.push(...(await runResourcePolicy(p, r)).map((v) => ({ ...v, policy: p.name })));
    }
    for (const p of stackPolicies) out.push(...(await runStackPolicy(p, stack)).map((v) => ({ ...v, policy: p.name })));
    return out;
}

describe("policy pack against the program's containers (spark stack, backend ray)", () => {
    it("finds nothing wrong with the spark stack's containers pinned by digest", async () => {
        expect(await runPack(await programContainers("spark", pinned))).toEqual([]);
    });

    it("finds nothing wrong with the monitoring containers (pinned): no GPU, a ceiling, no host path but their own", async () => {
        const monitoring = (raw: Raw) => {
            pinned(raw);
            raw.monitoring = {
                image: `prom/prometheus${DIGEST}`,
                nodeExporterImage: `prom/node-exporter${DIGEST}`,
                grafana: { image: `grafana/grafana${DIGEST}` },
            };
        };
        const containers = await programContainers("spark", monitoring);
        expect(containers.map((c) => c.name)).toEqual(
            expect.arrayContaining(["monitoring-prometheus", "monitoring-node-exporter-spark-1"]),
        );
        expect(await runPack(containers)).toEqual([]);
        // a tag-only monitoring image is flagged like the cluster's own
        const tagged = await runPack(
            await programContainers("spark", (raw) => (pinned(raw), (raw.monitoring = { image: "prom/prometheus:v2.53.0" }))),
        );
        expect(tagged.map((x) => x.policy)).toEqual(["image-pinned"]);
        expect(tagged[0].message).toContain("prom/prometheus:v2.53.0");
    });

    it("flags what the bad fixture stack configures: util 0.93 on unified memory and a tag-only image", async () => {
        const v = await runPack(await programContainers("spark", (raw) => (raw.serve.gpuMemoryUtilization = 0.93)));
        expect(v.map((x) => x.policy).sort()).toEqual(["gpu-memory-utilization", "image-pinned"]);
    });

    it("flags the spark stack's unified-memory hosts when the memory guard's ceiling or floor is turned off", async () => {
        const noFloor = await runPack(await programContainers("spark", (raw) => (pinned(raw), (raw.memoryGuard = { minAvailable: "0" }))));
        // every container of both hosts: the Ray head, the worker and serve
        expect(noFloor.map((x) => x.policy)).toEqual(Array(3).fill("unified-memory-guarded"));
        expect(noFloor.map((x) => x.message)).toEqual(Array(3).fill(expect.stringContaining("no memory floor")));
        const noCeiling = await runPack(await programContainers("spark", (raw) => (pinned(raw), (raw.memoryGuard = { limit: "0" }))));
        expect(noCeiling.map((x) => x.message)).toEqual(Array(3).fill(expect.stringContaining("no memory ceiling")));
        // serve's own ceiling is its own: only it is flagged when only it is missing
        const serveOnly = await runPack(
            await programContainers("spark", (raw) => (pinned(raw), (raw.memoryGuard = { limit: "0" }), (raw.serve.memoryLimit = "100g"))),
        );
        expect(serveOnly).toHaveLength(2);
    });

    it("passes 0.93 on hosts with dedicated GPU memory", async () => {
        const v = await runPack(
            await programContainers("spark", (raw) => {
                pinned(raw);
                raw.serve.gpuMemoryUtilization = 0.93;
                for (const n of raw.nodes) n.unifiedMemory = false;
            }),
        );
        expect(v).toEqual([]);
    });

    it("never gets an API key in serve.extraArgs however it is spelled: config validation refuses it first", async () => {
        // vLLM reads --api_key and --api-ke as --api-key; the pack flags them too (serveRequiresApiKey.test.ts), but a
        // program built from such a config never exists: validation names the flag, not the value, before any host.
        for (const spelling of ["--api_key=sk-from-config", "--api-ke=sk-from-config"]) {
            await expect(
                programContainers("spark", (raw) => {
                    pinned(raw);
                    raw.serve.extraArgs = [spelling];
                }),
            ).rejects.toThrow(/serve\.extraArgs\[0\]: --api-ke(y)?( would set --api-key.*)? is managed by the program.*value not shown/);
        }
    });
});

describe("policy pack against the program's native-backend ranks", () => {
    const native = (raw: Raw) => {
        pinned(raw);
        raw.backend = "native";
    };

    it("finds nothing wrong with two ranks (rank 0 with the key, rank 1 headless), pinned by digest", async () => {
        const ranks = await programContainers("spark", native);
        expect(ranks.map((r) => r.name).sort()).toEqual(["serve-rank-0-container", "serve-rank-1-container"]);
        expect(await runPack(ranks)).toEqual([]);
    });

    it("flags a master port on the serve port", async () => {
        // Config validation rejects this too; the pack must also stop it on its own.
        const ranks = await programContainers("spark", native);
        const rank0 = ranks.find((r) => r.name === "serve-rank-0-container")!;
        const props = rank0.props as { labels: { label: string; value: string }[] };
        const ports = props.labels.find((l) => l.label === "vllm-cluster.ports")!;
        ports.value = JSON.stringify({ ...JSON.parse(ports.value), master: 8001 });
        const v = await runPack(ranks);
        expect(v.map((x) => x.policy)).toEqual(["no-port-clash"]);
    });
});

describe("tests/policy/fixtures/Pulumi.policy-bad.yaml", () => {
    const file = join(__dirname, "fixtures", "Pulumi.policy-bad.yaml");
    const doc = yaml.load(readFileSync(file, "utf8")) as { config: Record<string, unknown> };
    const raw = Object.fromEntries(Object.entries(doc.config).map(([k, v]) => [k.replace(/^vllm-cluster:/, ""), v]));

    it("passes the program's config validation, so the policies are what must stop it", () => {
        expect(() => validateConfig(raw)).not.toThrow();
    });

    it("runs every policy of the pack", () => {
        expect(resourcePolicies.length + stackPolicies.length).toBe(packPolicies.length);
        expect(packPolicies.length).toBeGreaterThanOrEqual(9);
    });

    it("violates gpu-memory-utilization, ray-token-auth (both mandatory) and image-pinned (advisory) only", async () => {
        const cfg = validateConfig(raw);
        const run = await runStack("policy-bad", cfg);
        const containers = run.resources
            .filter((r) => r.type === "docker:index/container:Container")
            .map((r) => ({ name: r.name, props: clone(r.inputs) }));
        const v = await runPack(containers);
        expect(v.map((x) => x.policy).sort()).toEqual(["gpu-memory-utilization", "image-pinned", "ray-token-auth", "ray-token-auth"]);
    });
});

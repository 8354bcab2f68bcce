// Runs the pack against containers built by the program's own builders, so a change on either side of the label
// and command contract (components/commands.ts, components/containerArgs.ts) fails here, not in a live preview.
import { ResourceValidationPolicy, StackValidationPolicy } from "@pulumi/policy";
import {
    API_KEY_CONTAINER_PATH,
    NodeSpec,
    SERVE_ENTRYPOINT,
    RAY_ENTRYPOINT,
    ServeSpec,
    containerLabels,
    nodeEnv,
    rayHeadCommand,
    rayHeadPortsLabel,
    rayWorkerCommand,
    serveCommand,
    serveEnv,
} from "../../components/commands";
import { baseContainerArgs, modelVolume, nativeServeContainerArgs } from "../../components/containerArgs";
import { gpuContainersHostIpc } from "../../policies/gpuContainersHostIpc";
import { gpuMemoryUtilization } from "../../policies/gpuMemoryUtilization";
import { imagePinned } from "../../policies/imagePinned";
import { noPortClash } from "../../policies/noPortClash";
import { parallelismMatchesGpus } from "../../policies/parallelismMatchesGpus";
import { rayDashboardLoopback } from "../../policies/rayDashboardLoopback";
import { serveRequiresApiKey } from "../../policies/serveRequiresApiKey";
import { readFileSync } from "fs";
import { join } from "path";
import { validateConfig } from "../../infra/config";
import { NamedResource, Violation, runResourcePolicy, runStackPolicy } from "./util";

// js-yaml ships with @pulumi/pulumi (which reads Pulumi.yaml with it) but has no type declarations.
// eslint-disable-next-line @typescript-eslint/no-require-imports
const yaml: { load(text: string): unknown } = require("js-yaml");

const resourcePolicies: ResourceValidationPolicy[] = [
    gpuMemoryUtilization,
    rayDashboardLoopback,
    serveRequiresApiKey,
    gpuContainersHostIpc,
];
const stackPolicies: StackValidationPolicy[] = [noPortClash, parallelismMatchesGpus, imagePinned];

/** The builders return inputs; with plain arguments every input is a plain value, as the engine would send it. */
const plain = (args: object): Record<string, unknown> => Object.fromEntries(Object.entries(args));

function sparkNode(i: number, unifiedMemory = true): NodeSpec {
    return {
        name: `spark-${i}`,
        sshHost: `10.1.230.${179 + i}`,
        sshUser: "aurora",
        sshPort: 22,
        fabricIp: `192.168.200.${11 + i}`,
        fabricInterface: "enp1s0f1np1",
        rdmaDevices: ["rocep1s0f1"],
        gpus: 1,
        gpuRuntime: "nvidia",
        unifiedMemory,
        env: {},
    };
}

const MODEL = "/models/Qwen3.5-122B-A10B-FP8";
const ports = { gcsPort: 6379, dashboardPort: 8265, clientPort: 10001 };

function programStack(imageRef: string, serveChanges: Partial<ServeSpec> = {}, unifiedMemory = true): NamedResource[] {
    const [head, worker] = [sparkNode(1, unifiedMemory), sparkNode(2, unifiedMemory)];
    const common = { imageId: "sha256:" + "a".repeat(64), maxRestarts: 3, shmSize: "64g" };
    const spec: ServeSpec = {
        modelContainerPath: MODEL,
        servedName: "qwen3.5-122b-a10b-fp8",
        host: "0.0.0.0",
        port: 8001,
        tensorParallelSize: 2,
        pipelineParallelSize: 1,
        gpuMemoryUtilization: 0.9,
        maxModelLen: 32768,
        enableAutoToolChoice: true,
        trustRemoteCode: true,
        extraArgs: [],
        ...serveChanges,
    };
    const label = (role: "ray-head" | "ray-worker" | "serve", node: NodeSpec, p: Record<string, number>) => ({
        stack: "spark",
        role,
        node,
        imageRef,
        ports: p,
    });
    return [
        {
            name: "spark-1-ray-head",
            props: plain(
                baseContainerArgs({
                    ...common,
                    containerName: "vllm-ray-head",
                    node: head,
                    entrypoints: RAY_ENTRYPOINT,
                    command: rayHeadCommand({ node: head, ports }),
                    envs: nodeEnv(head),
                    labels: containerLabels(label("ray-head", head, rayHeadPortsLabel(ports)), {
                        "dashboard-host": "127.0.0.1",
                    }),
                    volumes: [modelVolume("/home/aurora/models/q", MODEL)],
                }),
            ),
        },
        {
            name: "spark-2-ray-worker",
            props: plain(
                baseContainerArgs({
                    ...common,
                    containerName: "vllm-ray-worker",
                    node: worker,
                    entrypoints: RAY_ENTRYPOINT,
                    command: rayWorkerCommand({ node: worker, headAddress: "192.168.200.12:6379" }),
                    envs: nodeEnv(worker),
                    labels: containerLabels(label("ray-worker", worker, {})),
                    volumes: [modelVolume("/home/aurora/models/q", MODEL)],
                }),
            ),
        },
        {
            name: "spark-1-serve",
            props: plain(
                baseContainerArgs({
                    ...common,
                    containerName: "vllm-serve",
                    node: head,
                    entrypoints: SERVE_ENTRYPOINT,
                    command: serveCommand(spec),
                    envs: serveEnv(head, "192.168.200.12:6379"),
                    labels: containerLabels(label("serve", head, { serve: spec.port }), {
                        "tensor-parallel-size": String(spec.tensorParallelSize),
                        "pipeline-parallel-size": String(spec.pipelineParallelSize),
                        "cluster-gpus": "2",
                        "api-key-file": API_KEY_CONTAINER_PATH,
                    }),
                    volumes: [
                        modelVolume("/home/aurora/models/q", MODEL),
                        {
                            hostPath: "/var/lib/vllm-cluster/spark-1/api-key",
                            containerPath: API_KEY_CONTAINER_PATH,
                            readOnly: true,
                        },
                    ],
                }),
            ),
        },
    ];
}

/** The native backend's ranks on the two Sparks, built by the program's own nativeServeContainerArgs. */
function nativeProgramStack(imageRef: string, masterPort = 29500): NamedResource[] {
    const nodes = [sparkNode(1), sparkNode(2)];
    return nodes.map((node, nodeRank) => ({
        name: `serve-rank-${nodeRank}-container`,
        props: plain(
            nativeServeContainerArgs({
                node,
                imageId: "sha256:" + "a".repeat(64),
                imageRef,
                stack: "spark",
                model: { hostPath: "/home/aurora/models/q", containerPath: MODEL },
                shmSize: "64g",
                maxRestarts: 3,
                serve: {
                    modelContainerPath: MODEL,
                    servedName: "qwen3.5-122b-a10b-fp8",
                    host: "0.0.0.0",
                    port: 8001,
                    tensorParallelSize: 2,
                    pipelineParallelSize: 1,
                    gpuMemoryUtilization: 0.9,
                    enableAutoToolChoice: false,
                    trustRemoteCode: false,
                    extraArgs: [],
                },
                stateDir: "/var/lib/vllm-cluster",
                rank: { nodeRank, nnodes: 2, masterAddr: nodes[0].fabricIp, masterPort },
                clusterGpus: 2,
                rank0ContainerId: nodeRank > 0 ? "rank0" : undefined,
            }),
        ),
    }));
}

async function runPack(stack: NamedResource[]): Promise<(Violation & { policy: string })[]> {
    const out: (Violation & { policy: string })[] = [];
    for (const p of resourcePolicies) {
        for (const r of stack) out.push(...(await runResourcePolicy(p, r)).map((v) => ({ ...v, policy: p.name })));
    }
    for (const p of stackPolicies) out.push(...(await runStackPolicy(p, stack)).map((v) => ({ ...v, policy: p.name })));
    return out;
}

describe("policy pack against the program's container builders", () => {
    it("finds nothing wrong with the spark stack's containers pinned by digest", async () => {
        expect(await runPack(programStack("hellohal2064/vllm-qwen3.5-gb10@sha256:" + "e".repeat(64)))).toEqual([]);
    });

    it("flags what the bad fixture stack configures: util 0.93 on unified memory and a tag-only image", async () => {
        const v = await runPack(programStack("hellohal2064/vllm-qwen3.5-gb10", { gpuMemoryUtilization: 0.93 }));
        expect(v.map((x) => x.policy).sort()).toEqual(["gpu-memory-utilization", "image-pinned"]);
    });

    it("passes 0.93 on hosts with dedicated GPU memory", async () => {
        const v = await runPack(programStack("r@sha256:" + "e".repeat(64), { gpuMemoryUtilization: 0.93 }, false));
        expect(v).toEqual([]);
    });

    it("flags an API key passed through serve.extraArgs in vLLM's underscore spelling", async () => {
        // Config validation rejects `--api-key` in extraArgs; vLLM also accepts `--api_key`.
        const v = await runPack(programStack("r@sha256:" + "e".repeat(64), { extraArgs: ["--api_key=sk-from-config"] }));
        expect(v.map((x) => x.policy)).toEqual(["serve-requires-api-key"]);
    });
});

describe("policy pack against the program's native-backend ranks", () => {
    it("finds nothing wrong with two ranks (rank 0 with the key, rank 1 headless), pinned by digest", async () => {
        expect(await runPack(nativeProgramStack("r@sha256:" + "e".repeat(64)))).toEqual([]);
    });

    it("flags a master port on the serve port", async () => {
        const v = await runPack(nativeProgramStack("r@sha256:" + "e".repeat(64), 8001));
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

    it("violates gpu-memory-utilization (mandatory) and image-pinned (advisory) only", async () => {
        const cfg = validateConfig(raw);
        const unified = cfg.nodes.every((n) => n.unifiedMemory);
        const v = await runPack(programStack(cfg.image.ref, { gpuMemoryUtilization: cfg.serve.gpuMemoryUtilization }, unified));
        expect(v.map((x) => x.policy).sort()).toEqual(["gpu-memory-utilization", "image-pinned"]);
    });
});

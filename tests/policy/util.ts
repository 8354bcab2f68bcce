import {
    PolicyResource,
    ReportViolation,
    ResourceValidationArgs,
    ResourceValidationPolicy,
    StackValidationArgs,
    StackValidationPolicy,
    unknownCheckingProxy,
} from "@pulumi/policy";
import { unknownValue } from "@pulumi/pulumi/runtime/rpc";

/** The engine's marker for a value not known yet (preview, or computed from another resource's output). */
export const UNKNOWN = unknownValue;
export const CONTAINER_TYPE = "docker:index/container:Container";

export interface Label {
    label: string;
    value: string;
}

/** The docker Container inputs the policies read, shaped as components/containerArgs.ts builds them. */
export interface ContainerProps {
    image: string;
    labels: Label[];
    entrypoints?: string[];
    command?: string[];
    envs?: string[];
    networkMode?: string;
    ipcMode?: string;
    shmSize?: number;
    mounts?: { target: string; source?: string; type: string; readOnly?: boolean }[];
    volumes?: { containerPath?: string; hostPath?: string; readOnly?: boolean }[];
}

export interface NamedResource {
    name: string;
    props: ContainerProps | Record<string, unknown>;
    type?: string;
}

const IMAGE_ID = "sha256:" + "a".repeat(64);
const IMAGE_REF = "vllm-cluster-testbed@sha256:" + "b".repeat(64);

/**
 * Deep copy built from literals, so the copy's objects belong to the test's realm. (structuredClone's do not
 * under jest, and the policy framework's proxy then silently skips them as non-objects.)
 */
export function clone<T>(v: T): T {
    if (Array.isArray(v)) return v.map(clone) as T;
    if (v !== null && typeof v === "object") {
        return Object.fromEntries(Object.entries(v).map(([k, x]) => [k, clone(x)])) as T;
    }
    return v;
}

function labels(common: Record<string, string>, extra: Record<string, string>): Label[] {
    return Object.entries({ ...common, ...extra }).map(([label, value]) => ({ label, value }));
}

function nodeLabels(role: string, node: string, ports: Record<string, number>): Record<string, string> {
    return {
        "vllm-cluster.managed": "true",
        "vllm-cluster.stack": "test",
        "vllm-cluster.role": role,
        "vllm-cluster.node": node,
        "vllm-cluster.gpus": "1",
        "vllm-cluster.gpu-runtime": "nvidia",
        "vllm-cluster.unified-memory": "true",
        "vllm-cluster.ssh-port": "22",
        "vllm-cluster.ports": JSON.stringify(ports),
        "vllm-cluster.image-ref": IMAGE_REF,
    };
}

/** A compliant Ray head on spark-1. */
export const RAY_AUTH_ENV = ["RAY_AUTH_MODE=token", "RAY_AUTH_TOKEN_PATH=/run/vllm-cluster/ray-token"];

export function rayHead(): ContainerProps {
    return {
        image: IMAGE_ID,
        labels: labels(nodeLabels("ray-head", "spark-1", { gcs: 6379, dashboard: 8265, client: 10001 }), {
            "vllm-cluster.dashboard-host": "127.0.0.1",
        }),
        entrypoints: ["/usr/bin/env"],
        command: [
            "ray",
            "start",
            "--head",
            "--node-ip-address=192.168.200.12",
            "--port=6379",
            "--dashboard-host=127.0.0.1",
            "--dashboard-port=8265",
            "--ray-client-server-port=10001",
            "--num-gpus=1",
            "--block",
        ],
        envs: ["NCCL_SOCKET_IFNAME=enp1s0f1np1", "VLLM_HOST_IP=192.168.200.12", ...RAY_AUTH_ENV],
        networkMode: "host",
        ipcMode: "host",
        shmSize: 65536,
        volumes: [{ hostPath: "/var/lib/vllm-cluster/spark-1/tmp", containerPath: "/tmp" }],
    };
}

/** A compliant Ray worker on `node` (default spark-2). */
export function rayWorker(node = "spark-2"): ContainerProps {
    return {
        image: IMAGE_ID,
        labels: labels(nodeLabels("ray-worker", node, {}), {}),
        entrypoints: ["/usr/bin/env"],
        command: ["ray", "start", "--address=192.168.200.12:6379", "--node-ip-address=192.168.200.13", "--num-gpus=1", "--block"],
        envs: ["NCCL_SOCKET_IFNAME=enp1s0f1np1", "VLLM_HOST_IP=192.168.200.13", ...RAY_AUTH_ENV],
        networkMode: "host",
        shmSize: 65536,
    };
}

export const API_KEY_FILE = "/run/vllm-cluster/api-key";
export const TLS_CERT_FILE = "/run/vllm-cluster/tls-cert.pem";
export const TLS_KEY_FILE = "/run/vllm-cluster/tls-key.pem";

/** A compliant vLLM serve container on spark-1 (TP 2 over the head's and the worker's GPU). */
export function serve(): ContainerProps {
    return {
        image: IMAGE_ID,
        labels: labels(nodeLabels("serve", "spark-1", { serve: 8001 }), {
            "vllm-cluster.tensor-parallel-size": "2",
            "vllm-cluster.pipeline-parallel-size": "1",
            "vllm-cluster.cluster-gpus": "2",
            "vllm-cluster.api-key-file": API_KEY_FILE,
            "vllm-cluster.cluster-fingerprint": "2-nodes-2-gpus",
        }),
        entrypoints: ["/bin/sh", "-c", `VLLM_API_KEY="$(cat ${API_KEY_FILE})" exec "$@"`, "vllm-serve"],
        command: [
            "vllm",
            "serve",
            "/models/Qwen3.5-122B-A10B-FP8",
            "--served-model-name",
            "qwen3.5-122b-a10b-fp8",
            "--host",
            "0.0.0.0",
            "--port",
            "8001",
            "--ssl-certfile",
            TLS_CERT_FILE,
            "--ssl-keyfile",
            TLS_KEY_FILE,
            "--tensor-parallel-size",
            "2",
            "--pipeline-parallel-size",
            "1",
            "--gpu-memory-utilization",
            "0.9",
            "--max-model-len",
            "32768",
            "--distributed-executor-backend",
            "ray",
        ],
        envs: ["RAY_ADDRESS=192.168.200.12:6379", "VLLM_HOST_IP=192.168.200.12"],
        networkMode: "host",
        ipcMode: "host",
        volumes: [
            {
                hostPath: "/models/Qwen3.5-122B-A10B-FP8",
                containerPath: "/models/Qwen3.5-122B-A10B-FP8",
                readOnly: true,
            },
            { hostPath: "/var/lib/vllm-cluster/spark-1/api-key", containerPath: API_KEY_FILE, readOnly: true },
            { hostPath: "/var/lib/vllm-cluster/spark-1/tls-cert.pem", containerPath: TLS_CERT_FILE, readOnly: true },
            { hostPath: "/var/lib/vllm-cluster/spark-1/tls-key.pem", containerPath: TLS_KEY_FILE, readOnly: true },
            { hostPath: "/var/lib/vllm-cluster/spark-1/tmp", containerPath: "/tmp" },
        ],
    };
}

/** The compliant two-node stack: head + serve on spark-1, worker on spark-2. */
export function cluster(): NamedResource[] {
    return [
        { name: "spark-1-ray-head", props: rayHead() },
        { name: "spark-2-ray-worker", props: rayWorker() },
        { name: "spark-1-serve", props: serve() },
    ];
}

/**
 * A compliant serve rank of the native backend (no Ray): rank 0 on spark-1 serves the API with the key file and
 * owns the master port; rank r > 0 on spark-(r+1) is headless, with no key file and no listening port.
 */
export function nativeRank(rank: number, nnodes = 2): ContainerProps {
    const node = `spark-${rank + 1}`;
    const base = serve();
    const labelsMap: Record<string, string> = {
        ...nodeLabels("serve", node, rank === 0 ? { serve: 8001, master: 29500 } : {}),
        "vllm-cluster.node-rank": String(rank),
        "vllm-cluster.tensor-parallel-size": String(nnodes),
        "vllm-cluster.pipeline-parallel-size": "1",
        "vllm-cluster.cluster-gpus": String(nnodes),
    };
    if (rank === 0) labelsMap["vllm-cluster.api-key-file"] = API_KEY_FILE;
    const command = (base.command ?? []).filter(
        (w, i, all) => w !== "--distributed-executor-backend" && all[i - 1] !== "--distributed-executor-backend",
    );
    command.splice(command.indexOf("--tensor-parallel-size") + 1, 1, String(nnodes));
    command.push("--distributed-executor-backend", "mp", "--nnodes", String(nnodes), "--node-rank", String(rank));
    command.push("--master-addr", "192.168.200.12", "--master-port", "29500");
    if (rank > 0) command.push("--headless");
    return {
        ...base,
        labels: labels(labelsMap, {}),
        entrypoints: rank === 0 ? base.entrypoints : ["/usr/bin/env"],
        command,
        envs: [`VLLM_HOST_IP=192.168.200.${12 + rank}`, "NCCL_SOCKET_IFNAME=enp1s0f1np1"],
        volumes: (base.volumes ?? []).filter((v) => v.containerPath !== "/tmp" && (rank === 0 || v.containerPath !== API_KEY_FILE)),
    };
}

/** The compliant native-backend stack: one serve rank per node, no Ray containers. */
export function nativeCluster(nnodes = 2): NamedResource[] {
    return Array.from({ length: nnodes }, (_, r) => ({ name: `spark-${r + 1}-serve`, props: nativeRank(r, nnodes) }));
}

/** Copy of `props` with a label set (or removed when `value` is undefined). */
export function withLabel<T extends ContainerProps>(props: T, key: string, value: string | undefined): T {
    const copy = clone(props);
    copy.labels = copy.labels.filter((l) => l.label !== key);
    if (value !== undefined) copy.labels.push({ label: key, value });
    return copy;
}

/** Copy of `props` whose command has `flag <value>` replaced (or removed when `value` is undefined). */
export function withFlag<T extends ContainerProps>(props: T, flag: string, value: string | undefined): T {
    const copy = clone(props);
    const cmd = copy.command ?? [];
    const i = cmd.indexOf(flag);
    if (i >= 0) cmd.splice(i, 2);
    if (value !== undefined) cmd.push(flag, value);
    copy.command = cmd;
    return copy;
}

/** Copy of `props` with top-level fields replaced; `undefined` removes a field. */
export function withProps<T extends ContainerProps>(props: T, changes: Partial<Record<keyof ContainerProps, unknown>>): T {
    const copy = clone(props) as Record<string, unknown>;
    for (const [k, v] of Object.entries(changes)) {
        if (v === undefined) delete copy[k];
        else copy[k] = v;
    }
    return copy as T;
}

function urnOf(name: string, type: string): string {
    return `urn:pulumi:test::vllm-cluster::vllm-cluster:index:SparkNode$${type}::${name}`;
}

const emptyOptions = {
    protect: false,
    ignoreChanges: [],
    aliases: [],
    customTimeouts: { createSeconds: 0, updateSeconds: 0, deleteSeconds: 0 },
    additionalSecretOutputs: [],
};

function notApplicable(reason?: string): never {
    throw new Error(`not applicable: ${reason ?? ""}`);
}

/** Props as the policy server hands them over: behind the proxy that throws on unknown values. */
function engineProps(props: object): Record<string, unknown> {
    return unknownCheckingProxy(clone(props)) as Record<string, unknown>;
}

export function resourceArgs(r: NamedResource, config: object = {}): ResourceValidationArgs {
    const type = r.type ?? CONTAINER_TYPE;
    return {
        type,
        props: engineProps(r.props),
        urn: urnOf(r.name, type),
        name: r.name,
        opts: emptyOptions,
        stackTags: new Map(),
        isType: () => false,
        asType: () => undefined,
        getConfig: <T extends object>() => clone(config) as T,
        notApplicable,
    };
}

export function stackArgs(resources: NamedResource[], config: object = {}): StackValidationArgs {
    return {
        resources: resources.map((r): PolicyResource => ({
            type: r.type ?? CONTAINER_TYPE,
            props: engineProps(r.props),
            urn: urnOf(r.name, r.type ?? CONTAINER_TYPE),
            name: r.name,
            opts: emptyOptions,
            dependencies: [],
            propertyDependencies: {},
            isType: () => false,
            asType: () => undefined,
        })),
        stackTags: new Map(),
        getConfig: <T extends object>() => clone(config) as T,
        notApplicable,
    };
}

export interface Violation {
    message: string;
    urn?: string;
}

export async function runResourcePolicy(policy: ResourceValidationPolicy, r: NamedResource, config: object = {}): Promise<Violation[]> {
    const violations: Violation[] = [];
    const report: ReportViolation = (message, urn) => violations.push({ message, urn });
    const validations = Array.isArray(policy.validateResource) ? policy.validateResource : [policy.validateResource];
    for (const validate of validations) {
        if (validate) await validate(resourceArgs(r, config), report);
    }
    return violations;
}

export async function runStackPolicy(policy: StackValidationPolicy, resources: NamedResource[], config: object = {}): Promise<Violation[]> {
    const violations: Violation[] = [];
    const report: ReportViolation = (message, urn) => violations.push({ message, urn });
    await policy.validateStack(stackArgs(resources, config), report);
    return violations;
}

/** Replaces the named resource in a stack. */
export function replace(resources: NamedResource[], name: string, props: NamedResource["props"]): NamedResource[] {
    return resources.map((r) => (r.name === name ? { ...r, props } : r));
}

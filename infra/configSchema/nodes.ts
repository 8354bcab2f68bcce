/** `nodes`: the GPU hosts, reached over SSH on the management network and talking to each other on the fabric. */
import { z } from "zod";
import {
    REQUIRED,
    bool,
    ipv4,
    isObject,
    isValidSshHost,
    item,
    list,
    oneOf,
    optional,
    pattern,
    port,
    positiveInt,
    quote,
    required,
    scalarText,
    section,
    string,
    withDefault,
} from "./fields";
import { evenIfInvalid, problem, valid, validFields } from "./rules";

/**
 * Environment the program sets itself on every container (see nodeEnv), or that must never be configured:
 * VLLM_API_KEY and the Ray token reach the containers only from their files.
 */
export const MANAGED_ENV: readonly string[] = [
    "VLLM_HOST_IP",
    "NCCL_SOCKET_IFNAME",
    "GLOO_SOCKET_IFNAME",
    "NCCL_IB_HCA",
    "NCCL_IB_DISABLE",
    "RAY_ADDRESS",
    "RAY_memory_monitor_refresh_ms",
    "VLLM_API_KEY",
    "RAY_AUTH_MODE",
    "RAY_AUTH_TOKEN",
    "RAY_AUTH_TOKEN_PATH",
    // ports the program pins through the environment (the port contract claims them)
    "AUTOSCALER_METRIC_PORT",
    "DASHBOARD_METRIC_PORT",
];

/** A node name becomes part of container labels and resource names, so it is kept to a DNS label. */
const NODE_NAME_RE = /^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$/;
const USER_RE = /^[a-z_][a-z0-9_.-]{0,31}$/;
const IFNAME_RE = /^[A-Za-z0-9_.:-]{1,15}$/;
const RDMA_RE = /^[A-Za-z0-9_.:-]{1,64}$/;
const ENV_NAME_RE = /^[A-Za-z_][A-Za-z0-9_]*$/;
const SINGLE_LINE = "must be a single-line string";

const envName = z
    .string()
    .regex(ENV_NAME_RE, { error: "is not a valid environment variable name", abort: true })
    .refine((name) => !MANAGED_ENV.includes(name), {
        error: "is set by the program (or must never be configured) and cannot be overridden",
    })
    .meta({ rule: `\`${ENV_NAME_RE.source}\`, none of ${MANAGED_ENV.join(", ")}` });

/** Values are never echoed: they may be secrets. YAML numbers and booleans are taken as their text. */
const envValue = z
    .preprocess(
        scalarText,
        z.string({ error: SINGLE_LINE }).refine((v) => !/[\n\0]/.test(v), { error: SINGLE_LINE }),
    )
    .meta({ rule: "one line of text (numbers and booleans are taken as their text)" });

const envMap = z
    .record(envName, envValue, {
        error: (iss) => (iss.code === "invalid_key" ? iss.issues[0]?.message : "must be a map of environment variable names to values"),
    })
    .default(() => ({}));

const UNIQUE = "unique across nodes";

export const nodeFields = {
    name: required(pattern(NODE_NAME_RE, "node name ([a-z0-9-])")).meta({
        description: "The node's name in container labels, resource names and messages.",
        across: UNIQUE,
    }),
    sshHost: required(
        string()
            .refine(isValidSshHost, {
                error: (iss) => `${quote(iss.input)} is a malformed SSH host (expected an IPv4 address or DNS name)`,
            })
            .meta({ rule: "an IPv4 address or a DNS name" }),
    ).meta({
        description:
            "The management address the operator's SSH and the Docker provider dial; the only address the operator needs to reach.",
        across: `${UNIQUE} (DNS names compared without case, every loopback name is one host)`,
    }),
    sshUser: required(pattern(USER_RE, "user name")).describe("The login user on the host: root, or a member of the docker group."),
    sshPort: port(22).meta({
        description: "The host's sshd port, on the management network and (for the chains' hops) on the fabric.",
        across: "distinct from the ports the backend opens on this host; outside ray.minWorkerPort..maxWorkerPort (backend ray)",
    }),
    fabricIp: required(ipv4()).meta({
        description: "Ray, NCCL and vLLM's rendezvous bind to this address: the fast fabric, not the management network.",
        across: UNIQUE,
    }),
    fabricInterface: required(pattern(IFNAME_RE, "interface name")).describe(
        "The interface that holds fabricIp (preflight checks it): NCCL_SOCKET_IFNAME and GLOO_SOCKET_IFNAME.",
    ),
    rdmaDevices: list(item(RDMA_RE, "RDMA device name")).describe("RDMA devices for NCCL (NCCL_IB_HCA); empty sets NCCL_IB_DISABLE=1."),
    gpus: positiveInt().describe(
        "GPUs the node gives the cluster (Ray's --num-gpus; preflight counts them with nvidia-smi on nvidia nodes).",
    ),
    gpuRuntime: withDefault(oneOf(["nvidia", "none"]), "nvidia").describe(
        "nvidia: containers get the host's GPUs from the engine; none: no GPUs from the engine (CPU-only hosts such as the simulated testbed).",
    ),
    unifiedMemory: bool(false).describe(
        "The CPU and the GPU share the host's memory (GB10): memoryGuard's default ceiling and floor apply, and Ray's memory monitor is off.",
    ),
    role: optional(oneOf(["head", "worker"])).meta({
        description: "Usually left out: the first node without a role becomes the head.",
        across: "exactly one head in the cluster",
    }),
    env: envMap.describe("Extra environment for every project container on this node (e.g. CPU thread binding, NCCL debugging)."),
};

const nodeSchema = section(nodeFields);
type ParsedNode = z.output<typeof nodeSchema>;

/** A role as written: "unset" when the key is absent, "invalid" when the node or the value is malformed. */
type WrittenRole = "head" | "worker" | "unset" | "invalid";

export function writtenRole(node: unknown): WrittenRole {
    if (!isObject(node)) {
        return "invalid";
    }
    return node.role === undefined ? "unset" : (valid(nodeFields.role, node.role) ?? "invalid");
}

/** The head: the node with role head, else the first node without a role; -1 if there is none. */
export function headIndex(roles: readonly WrittenRole[]): number {
    const explicit = roles.indexOf("head");
    return explicit >= 0 ? explicit : roles.indexOf("unset");
}

/**
 * What makes two SSH hosts one: DNS names are case-insensitive and a trailing dot changes nothing; every loopback
 * name or address is this machine. (Two different names of one host stay two: nothing here resolves names.)
 */
function sameHost(key: string, v: string): string {
    if (key !== "sshHost") return v;
    const h = v.toLowerCase().replace(/\.$/, "");
    return h === "localhost" || h.endsWith(".localhost") || /^127\./.test(h) ? "loopback" : h;
}

/** Each name, SSH host and fabric IP belongs to one node: containers, labels and NCCL peers are keyed by them. */
function noDuplicates(nodes: unknown[], ctx: z.RefinementCtx): void {
    const fields = nodes.map((n) => (isObject(n) ? validFields(nodeFields, n) : {}));
    for (const key of ["name", "sshHost", "fabricIp"] as const) {
        const seen = new Map<string, number>();
        fields.forEach((f, i) => {
            const v = f[key];
            const first = v === undefined ? undefined : seen.get(sameHost(key, v));
            if (first !== undefined) {
                problem(ctx, [i, key], `${v} is used by nodes[${first}]`);
            } else if (v !== undefined) {
                seen.set(sameHost(key, v), i);
            }
        });
    }
}

function oneHead(nodes: unknown[], ctx: z.RefinementCtx): void {
    const roles = nodes.map(writtenRole);
    const heads = roles.flatMap((r, i) => (r === "head" ? [i] : []));
    if (heads.length > 1) {
        problem(ctx, [heads[1], "role"], `more than one head: nodes[${heads[0]}] is already the head`);
    } else if (headIndex(roles) < 0 && nodes.some(isObject)) {
        problem(ctx, [], "no head node: set role: head on exactly one node");
    }
}

function resolveRoles(nodes: ParsedNode[]) {
    const head = headIndex(nodes.map(writtenRole));
    return nodes.map((n) => ({ ...n, role: n === nodes[head] ? ("head" as const) : ("worker" as const) }));
}

export const nodesSchema = z
    .array(nodeSchema, {
        error: (iss) => (iss.input === undefined ? `${REQUIRED} (a list with at least one node)` : "must be a non-empty list"),
    })
    .refine((nodes) => nodes.length > 0, { error: "must be a non-empty list" })
    .superRefine((nodes: unknown, ctx) => {
        if (Array.isArray(nodes)) {
            noDuplicates(nodes, ctx);
            oneHead(nodes, ctx);
        }
    }, evenIfInvalid)
    .transform(resolveRoles);

export type NodeConfig = z.output<typeof nodesSchema>[number];
export type GpuRuntime = NodeConfig["gpuRuntime"];

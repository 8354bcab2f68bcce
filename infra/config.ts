import * as pulumi from "@pulumi/pulumi";
import * as path from "path";
import { ServeArgs } from "../components/commands";

/** Project config namespace; every key below lives under `vllm-cluster:`. */
export const CONFIG_NAMESPACE = "vllm-cluster";

export type GpuRuntime = "nvidia" | "none";
export type ImageSource = "host" | "local" | "registry";

export interface NodeConfig {
    name: string;
    sshHost: string;
    sshUser: string;
    sshPort: number;
    fabricIp: string;
    fabricInterface: string;
    rdmaDevices: string[];
    gpus: number;
    gpuRuntime: GpuRuntime;
    unifiedMemory: boolean;
    role: "head" | "worker";
    /** Extra environment for every project container on this node (e.g. CPU thread binding, NCCL debugging). */
    env: Record<string, string>;
}

export interface ImageConfig {
    ref: string;
    source: ImageSource;
    /** Node that already holds the image (source=host only). */
    sourceNode?: string;
}

export interface ModelConfig {
    hostPath: string;
    containerPath: string;
    servedName: string;
}

export interface ServeConfig extends ServeArgs {
    /** Container /dev/shm size, docker syntax (e.g. 64g); undefined keeps the engine default. */
    shmSize?: string;
    readyTimeoutSeconds: number;
    maxRestarts: number;
}

export interface RayConfig {
    gcsPort: number;
    dashboardPort: number;
    clientPort: number;
    objectStoreMemoryBytes?: number;
    readyTimeoutSeconds: number;
}

/** vLLM's own multi-node (backend: native): rank 0 hosts the rendezvous on the head's fabric IP. */
export interface NativeConfig {
    /** TCP port rank 0 listens on for the other ranks (vLLM --master-port); on the head host only. */
    masterPort: number;
}

export type Backend = "ray" | "native";

export interface SshConfig {
    privateKeyPath: string;
    knownHostsFile: string;
}

export interface ClusterConfig {
    nodes: NodeConfig[];
    /** The node with role head (validated: exactly one). */
    head: NodeConfig;
    workers: NodeConfig[];
    totalGpus: number;
    image: ImageConfig;
    model: ModelConfig;
    serve: ServeConfig;
    /** Read and validated for every backend; only the ray backend uses it. */
    ray: RayConfig;
    /** Read and validated for every backend; only the native backend uses it. */
    native: NativeConfig;
    ssh: SshConfig;
    stateDir: string;
    backend: Backend;
}

/**
 * vllm serve flags the program sets itself; repeating one in serve.extraArgs would silently override (or
 * contradict) the managed value, so validation rejects it.
 */
export const MANAGED_SERVE_FLAGS: readonly string[] = [
    "--model",
    "--served-model-name",
    "--host",
    "--port",
    "--api-key",
    "--tensor-parallel-size",
    "-tp",
    "--pipeline-parallel-size",
    "-pp",
    "--distributed-executor-backend",
    "--gpu-memory-utilization",
    "--max-model-len",
    "--reasoning-parser",
    "--tool-call-parser",
    "--enable-auto-tool-choice",
    "--trust-remote-code",
    "--load-format",
    // native backend (vLLM's multi-node without Ray)
    "--nnodes",
    "--node-rank",
    "--master-addr",
    "--master-port",
    "--headless",
];

const TOP_KEYS = ["nodes", "image", "model", "serve", "ray", "native", "ssh", "stateDir", "backend"];
const NODE_KEYS = [
    "name",
    "sshHost",
    "sshUser",
    "sshPort",
    "fabricIp",
    "fabricInterface",
    "rdmaDevices",
    "gpus",
    "gpuRuntime",
    "unifiedMemory",
    "role",
    "env",
];
const IMAGE_KEYS = ["ref", "source", "sourceNode"];
const MODEL_KEYS = ["hostPath", "containerPath", "servedName"];
const SERVE_KEYS = [
    "port",
    "host",
    "tensorParallelSize",
    "pipelineParallelSize",
    "gpuMemoryUtilization",
    "maxModelLen",
    "reasoningParser",
    "toolCallParser",
    "enableAutoToolChoice",
    "trustRemoteCode",
    "loadFormat",
    "extraArgs",
    "shmSize",
    "readyTimeoutSeconds",
    "maxRestarts",
];
const RAY_KEYS = ["gcsPort", "dashboardPort", "clientPort", "objectStoreMemoryBytes", "readyTimeoutSeconds"];
const NATIVE_KEYS = ["masterPort"];
const SSH_KEYS = ["privateKeyPath", "knownHostsFile"];

const NODE_NAME_RE = /^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$/;
const IPV4_RE = /^(25[0-5]|2[0-4]\d|1\d\d|[1-9]?\d)(\.(25[0-5]|2[0-4]\d|1\d\d|[1-9]?\d)){3}$/;
const DNS_LABEL = "[A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?";
const DNS_NAME_RE = new RegExp(`^${DNS_LABEL}(\\.${DNS_LABEL})*\\.?$`);
const USER_RE = /^[a-z_][a-z0-9_.-]{0,31}$/;
const IFNAME_RE = /^[A-Za-z0-9_.:-]{1,15}$/;
const RDMA_RE = /^[A-Za-z0-9_.:-]{1,64}$/;
const IMAGE_REF_RE = /^[A-Za-z0-9][A-Za-z0-9._\-/:@]*$/;
const TOKEN_RE = /^[A-Za-z0-9][A-Za-z0-9._\-/:]*$/;
const SHM_RE = /^[1-9]\d*[bkmg]?$/i;
const ENV_NAME_RE = /^[A-Za-z_][A-Za-z0-9_]*$/;

/**
 * Environment the program sets itself on every container (see nodeEnv), or that must never be configured:
 * VLLM_API_KEY reaches the server only from the key file.
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
];

type Raw = Record<string, unknown>;

function isObject(v: unknown): v is Raw {
    return typeof v === "object" && v !== null && !Array.isArray(v);
}

export function isIPv4(s: string): boolean {
    return IPV4_RE.test(s);
}

/** An SSH host is an IPv4 address or a DNS name; anything else (user@, port, spaces, leading '-') is malformed. */
export function isValidSshHost(s: string): boolean {
    if (/^\d+(\.\d+)*$/.test(s)) {
        return isIPv4(s);
    }
    return DNS_NAME_RE.test(s) && s.length <= 253;
}

/** Collects every problem, so the operator fixes the stack file in one round. */
class Problems {
    readonly list: string[] = [];
    add(keyPath: string, rule: string): void {
        this.list.push(`${keyPath}: ${rule}`);
    }
}

class Reader {
    constructor(
        private readonly p: Problems,
        private readonly obj: Raw,
        private readonly prefix: string,
    ) {}

    private key(k: string): string {
        return this.prefix ? `${this.prefix}.${k}` : k;
    }

    has(k: string): boolean {
        return this.obj[k] !== undefined && this.obj[k] !== null;
    }

    unknownKeys(allowed: string[]): void {
        for (const k of Object.keys(this.obj)) {
            if (!allowed.includes(k)) {
                this.p.add(this.key(k), "unknown key");
            }
        }
    }

    str(k: string, opts: { required?: boolean; re?: RegExp; what?: string } = {}): string | undefined {
        const v = this.obj[k];
        if (v === undefined || v === null || v === "") {
            if (opts.required) {
                this.p.add(this.key(k), "is required");
            }
            return undefined;
        }
        if (typeof v !== "string") {
            this.p.add(this.key(k), "must be a string");
            return undefined;
        }
        if (opts.re && !opts.re.test(v)) {
            this.p.add(this.key(k), `${JSON.stringify(v)} is not a valid ${opts.what ?? "value"}`);
            return undefined;
        }
        return v;
    }

    int(k: string, opts: { required?: boolean; def?: number; min?: number; max?: number; what?: string } = {}): number | undefined {
        const v = this.obj[k];
        if (v === undefined || v === null) {
            if (opts.required) {
                this.p.add(this.key(k), "is required");
            }
            return opts.def;
        }
        const n = typeof v === "string" && /^-?\d+$/.test(v) ? Number(v) : v;
        if (typeof n !== "number" || !Number.isInteger(n)) {
            this.p.add(this.key(k), `${JSON.stringify(v)} must be an integer`);
            return undefined;
        }
        const lo = opts.min ?? Number.MIN_SAFE_INTEGER;
        const hi = opts.max ?? Number.MAX_SAFE_INTEGER;
        if (n < lo || n > hi) {
            const range = opts.max !== undefined ? `${lo}..${hi}` : `>= ${lo}`;
            this.p.add(this.key(k), `${n} is out of range ${range}${opts.what ? ` (${opts.what})` : ""}`);
            return undefined;
        }
        return n;
    }

    port(k: string, def: number): number | undefined {
        return this.int(k, { def, min: 1, max: 65535, what: "TCP port" });
    }

    bool(k: string, def: boolean): boolean {
        const v = this.obj[k];
        if (v === undefined || v === null) {
            return def;
        }
        if (typeof v === "boolean") {
            return v;
        }
        if (v === "true" || v === "false") {
            return v === "true";
        }
        this.p.add(this.key(k), `${JSON.stringify(v)} must be true or false`);
        return def;
    }

    absPath(k: string, required: boolean): string | undefined {
        const v = this.str(k, { required });
        if (v !== undefined && (!path.posix.isAbsolute(v) || /[\s'"\\]/.test(v))) {
            this.p.add(this.key(k), `${JSON.stringify(v)} must be an absolute path without spaces or quotes`);
            return undefined;
        }
        return v;
    }

    strList(k: string, re?: RegExp, what?: string): string[] {
        const v = this.obj[k];
        if (v === undefined || v === null) {
            return [];
        }
        if (!Array.isArray(v)) {
            this.p.add(this.key(k), "must be a list of strings");
            return [];
        }
        const out: string[] = [];
        v.forEach((item, i) => {
            if (typeof item !== "string" || item === "") {
                this.p.add(`${this.key(k)}[${i}]`, "must be a non-empty string");
            } else if (re && !re.test(item)) {
                this.p.add(`${this.key(k)}[${i}]`, `${JSON.stringify(item)} is not a valid ${what ?? "value"}`);
            } else {
                out.push(item);
            }
        });
        return out;
    }

    /** A map of environment variable names to string values; values are never echoed (they may be secrets). */
    envMap(k: string): Record<string, string> {
        const v = this.obj[k];
        if (v === undefined || v === null) {
            return {};
        }
        if (!isObject(v)) {
            this.p.add(this.key(k), "must be a map of environment variable names to values");
            return {};
        }
        const out: Record<string, string> = {};
        for (const [name, value] of Object.entries(v)) {
            const at = `${this.key(k)}.${name}`;
            if (!ENV_NAME_RE.test(name)) {
                this.p.add(at, "is not a valid environment variable name");
            } else if (MANAGED_ENV.includes(name)) {
                this.p.add(at, "is set by the program (or must never be configured) and cannot be overridden");
            } else if (typeof value === "number" || typeof value === "boolean") {
                out[name] = String(value);
            } else if (typeof value !== "string" || /[\n\0]/.test(value)) {
                this.p.add(at, "must be a single-line string");
            } else {
                out[name] = value;
            }
        }
        return out;
    }

    section(k: string, required: boolean): Reader {
        const v = this.obj[k];
        if (v === undefined || v === null) {
            if (required) {
                this.p.add(this.key(k), "is required");
            }
            return new Reader(this.p, {}, this.key(k));
        }
        if (!isObject(v)) {
            this.p.add(this.key(k), "must be an object");
            return new Reader(this.p, {}, this.key(k));
        }
        return new Reader(this.p, v, this.key(k));
    }
}

/** The flag an extraArgs element sets, if it is a flag (`--x=1` and `--x` both give `--x`). */
function flagOf(arg: string): string | undefined {
    if (!arg.startsWith("-")) {
        return undefined;
    }
    return arg.split("=", 1)[0];
}

/**
 * Validates the raw stack config into a typed ClusterConfig. Pure: no Pulumi runtime, no I/O. Throws one Error
 * that lists every problem as `<key path>: <rule>`. Values of serve.extraArgs are never echoed (they may carry
 * secrets such as a key passed by mistake).
 */
export function validateConfig(raw: unknown): ClusterConfig {
    const p = new Problems();
    const top = new Reader(p, isObject(raw) ? raw : {}, "");
    top.unknownKeys(TOP_KEYS);

    // nodes
    const nodes: NodeConfig[] = [];
    const roleGiven: boolean[] = [];
    const rawNodes = isObject(raw) ? raw.nodes : undefined;
    if (rawNodes === undefined || rawNodes === null) {
        p.add("nodes", "is required (a list with at least one node)");
    } else if (!Array.isArray(rawNodes) || rawNodes.length === 0) {
        p.add("nodes", "must be a non-empty list");
    } else {
        rawNodes.forEach((rn: unknown, i: number) => {
            const at = `nodes[${i}]`;
            if (!isObject(rn)) {
                p.add(at, "must be an object");
                return;
            }
            const r = new Reader(p, rn, at);
            r.unknownKeys(NODE_KEYS);
            const name = r.str("name", { required: true, re: NODE_NAME_RE, what: "node name ([a-z0-9-])" });
            const sshHostRaw = r.str("sshHost", { required: true });
            let sshHost: string | undefined = sshHostRaw;
            if (sshHostRaw !== undefined && !isValidSshHost(sshHostRaw)) {
                p.add(`${at}.sshHost`, `${JSON.stringify(sshHostRaw)} is a malformed SSH host (expected an IPv4 address or DNS name)`);
                sshHost = undefined;
            }
            const sshUser = r.str("sshUser", { required: true, re: USER_RE, what: "user name" });
            const sshPort = r.port("sshPort", 22);
            const fabricRaw = r.str("fabricIp", { required: true });
            let fabricIp: string | undefined = fabricRaw;
            if (fabricRaw !== undefined && !isIPv4(fabricRaw)) {
                p.add(`${at}.fabricIp`, `${JSON.stringify(fabricRaw)} is not a valid IPv4 address`);
                fabricIp = undefined;
            }
            const fabricInterface = r.str("fabricInterface", { required: true, re: IFNAME_RE, what: "interface name" });
            const rdmaDevices = r.strList("rdmaDevices", RDMA_RE, "RDMA device name");
            const gpus = r.int("gpus", { required: true, min: 1 });
            const gpuRuntimeRaw = r.str("gpuRuntime") ?? "nvidia";
            if (gpuRuntimeRaw !== "nvidia" && gpuRuntimeRaw !== "none") {
                p.add(`${at}.gpuRuntime`, `${JSON.stringify(gpuRuntimeRaw)} must be one of nvidia, none`);
            }
            const unifiedMemory = r.bool("unifiedMemory", false);
            const roleRaw = r.str("role");
            if (roleRaw !== undefined && roleRaw !== "head" && roleRaw !== "worker") {
                p.add(`${at}.role`, `${JSON.stringify(roleRaw)} must be one of head, worker`);
            }
            nodes.push({
                name: name ?? "",
                sshHost: sshHost ?? "",
                sshUser: sshUser ?? "",
                sshPort: sshPort ?? 22,
                fabricIp: fabricIp ?? "",
                fabricInterface: fabricInterface ?? "",
                rdmaDevices,
                gpus: gpus ?? 0,
                gpuRuntime: gpuRuntimeRaw === "none" ? "none" : "nvidia",
                unifiedMemory,
                role: roleRaw === "head" ? "head" : "worker",
                env: {},
            });
            nodes[nodes.length - 1].env = r.envMap("env");
            // The head choice below must tell "role unset" from "role: worker".
            roleGiven.push(roleRaw !== undefined);
        });
    }

    const dup = (field: "name" | "sshHost" | "fabricIp") => {
        const seen = new Map<string, number>();
        nodes.forEach((n, i) => {
            const v = n[field];
            if (!v) {
                return;
            }
            const first = seen.get(v);
            if (first !== undefined) {
                p.add(`nodes[${i}].${field}`, `${v} is used by nodes[${first}]`);
            } else {
                seen.set(v, i);
            }
        });
    };
    dup("name");
    dup("sshHost");
    dup("fabricIp");

    // head: exactly one; default is the first node without an explicit role
    const heads = nodes.map((n, i) => ({ n, i })).filter(({ n }) => n.role === "head");
    let headIndex = -1;
    if (heads.length > 1) {
        p.add(`nodes[${heads[1].i}].role`, `more than one head: nodes[${heads[0].i}] is already the head`);
    } else if (heads.length === 1) {
        headIndex = heads[0].i;
    } else if (nodes.length > 0) {
        headIndex = roleGiven.findIndex((given) => !given);
        if (headIndex < 0) {
            p.add("nodes", "no head node: set role: head on exactly one node");
        }
    }
    nodes.forEach((n, i) => {
        n.role = i === headIndex ? "head" : "worker";
    });
    const head = headIndex >= 0 ? nodes[headIndex] : nodes[0];
    const totalGpus = nodes.reduce((s, n) => s + n.gpus, 0);

    // image
    const ir = top.section("image", true);
    ir.unknownKeys(IMAGE_KEYS);
    const ref = ir.str("ref", { required: true, re: IMAGE_REF_RE, what: "image reference" }) ?? "";
    const sourceRaw = ir.str("source") ?? "host";
    if (!["host", "local", "registry"].includes(sourceRaw)) {
        p.add("image.source", `${JSON.stringify(sourceRaw)} must be one of host, local, registry`);
    }
    const source = sourceRaw as ImageSource;
    let sourceNode = ir.str("sourceNode");
    if (source === "host") {
        if (sourceNode === undefined) {
            sourceNode = head?.name;
        } else if (nodes.length > 0 && !nodes.some((n) => n.name === sourceNode)) {
            p.add("image.sourceNode", `${JSON.stringify(sourceNode)} is not one of the nodes (${nodes.map((n) => n.name).join(", ")})`);
        }
    } else if (sourceNode !== undefined && (source === "local" || source === "registry")) {
        p.add("image.sourceNode", `only valid with image.source=host (source is ${source})`);
    }

    // model
    const mr = top.section("model", true);
    mr.unknownKeys(MODEL_KEYS);
    const hostPath = mr.absPath("hostPath", true) ?? "";
    const containerPath = mr.absPath("containerPath", false) ?? (hostPath ? `/models/${path.posix.basename(hostPath)}` : "");
    const servedName = mr.str("servedName", { required: true, re: TOKEN_RE, what: "served model name" }) ?? "";

    // ray
    const rr = top.section("ray", false);
    rr.unknownKeys(RAY_KEYS);
    const gcsPort = rr.port("gcsPort", 6379);
    const dashboardPort = rr.port("dashboardPort", 8265);
    const clientPort = rr.port("clientPort", 10001);
    const objectStoreMemoryBytes = rr.int("objectStoreMemoryBytes", { min: 78643200 });
    const rayReady = rr.int("readyTimeoutSeconds", { def: 300, min: 1 });

    // native (vLLM's own multi-node); validated whatever the backend, used only by backend native
    const nr = top.section("native", false);
    nr.unknownKeys(NATIVE_KEYS);
    const masterPort = nr.port("masterPort", 29500);

    // backend: read before the port check, which depends on it
    const backendRaw = top.str("backend") ?? "ray";
    if (backendRaw !== "ray" && backendRaw !== "native") {
        p.add("backend", `${JSON.stringify(backendRaw)} must be one of ray, native`);
    }
    const backend: Backend = backendRaw === "native" ? "native" : "ray";

    // serve
    const sr = top.section("serve", true);
    sr.unknownKeys(SERVE_KEYS);
    const servePort = sr.port("port", 8000);
    const serveHost = sr.str("host") ?? "0.0.0.0";
    if (!isIPv4(serveHost)) {
        p.add("serve.host", `${JSON.stringify(serveHost)} is not a valid IPv4 address`);
    }
    const tp = sr.int("tensorParallelSize", { required: true, min: 1 });
    const pp = sr.int("pipelineParallelSize", { def: 1, min: 1 });
    // Only meaningful when every node's GPU count is valid (gpus 0 marks a node with a reported problem).
    const gpusKnown = nodes.length > 0 && nodes.every((n) => n.gpus > 0);
    if (tp !== undefined && pp !== undefined && gpusKnown && tp * pp !== totalGpus) {
        p.add(
            "serve.tensorParallelSize",
            `tensorParallelSize x pipelineParallelSize = ${tp} x ${pp} = ${tp * pp} but the nodes offer ${totalGpus} GPUs (TP x PP must equal total GPUs)`,
        );
    }
    let util: number | undefined = 0.9;
    const utilRaw = isObject(raw) && isObject(raw.serve) ? raw.serve.gpuMemoryUtilization : undefined;
    if (utilRaw !== undefined && utilRaw !== null) {
        const u = typeof utilRaw === "string" ? Number(utilRaw) : utilRaw;
        if (typeof u !== "number" || !Number.isFinite(u) || u <= 0 || u > 1) {
            p.add("serve.gpuMemoryUtilization", `${JSON.stringify(utilRaw)} must be in (0, 1]`);
            util = undefined;
        } else {
            util = u;
        }
    }
    const maxModelLen = sr.int("maxModelLen", { min: 1 });
    const reasoningParser = sr.str("reasoningParser", { re: TOKEN_RE, what: "parser name" });
    const toolCallParser = sr.str("toolCallParser", { re: TOKEN_RE, what: "parser name" });
    const enableAutoToolChoice = sr.bool("enableAutoToolChoice", false);
    const trustRemoteCode = sr.bool("trustRemoteCode", false);
    const loadFormat = sr.str("loadFormat", { re: TOKEN_RE, what: "load format" });
    const extraArgs = sr.strList("extraArgs");
    extraArgs.forEach((a, i) => {
        const f = flagOf(a);
        if (f !== undefined && MANAGED_SERVE_FLAGS.includes(f)) {
            p.add(`serve.extraArgs[${i}]`, `${f} is managed by the program; set it through its own key (value not shown)`);
        }
    });
    if (enableAutoToolChoice && toolCallParser === undefined) {
        p.add("serve.enableAutoToolChoice", "requires serve.toolCallParser");
    }
    const shmSize = sr.str("shmSize", { re: SHM_RE, what: "size (e.g. 64g)" });
    const serveReady = sr.int("readyTimeoutSeconds", { def: 1800, min: 1 });
    const maxRestarts = sr.int("maxRestarts", { def: 3, min: 0, max: 100 });

    // ports on each host: the head carries serve + the backend's head ports (ray: GCS, dashboard, client;
    // native: the master port); every node its ssh port. The other backend's ports are not opened, so not checked.
    if (head) {
        const headPorts: [string, number | undefined][] =
            backend === "native"
                ? [
                      ["serve.port", servePort],
                      ["native.masterPort", masterPort],
                  ]
                : [
                      ["serve.port", servePort],
                      ["ray.gcsPort", gcsPort],
                      ["ray.dashboardPort", dashboardPort],
                      ["ray.clientPort", clientPort],
                  ];
        for (const n of nodes) {
            const i = nodes.indexOf(n);
            const used: [string, number | undefined][] = [[`nodes[${i}].sshPort`, n.sshPort]];
            if (n === head) {
                used.push(...headPorts);
            }
            const seen = new Map<number, string>();
            for (const [key, port] of used) {
                if (port === undefined) {
                    continue;
                }
                const other = seen.get(port);
                if (other !== undefined) {
                    p.add(key, `port ${port} clashes with ${other} on host ${n.name || `nodes[${i}]`}`);
                } else {
                    seen.set(port, key);
                }
            }
        }
    }

    // ssh
    const shr = top.section("ssh", true);
    shr.unknownKeys(SSH_KEYS);
    const privateKeyPath = shr.str("privateKeyPath", { required: true }) ?? "";
    const knownHostsFile = shr.str("knownHostsFile", { required: true }) ?? "";
    for (const [k, v] of [
        ["ssh.privateKeyPath", privateKeyPath],
        ["ssh.knownHostsFile", knownHostsFile],
    ] as const) {
        if (v && /[\s'"\\]/.test(v)) {
            p.add(k, "must be a path without spaces or quotes");
        }
    }

    const stateDir = top.absPath("stateDir", false) ?? "/var/lib/vllm-cluster";

    if (p.list.length > 0) {
        throw new Error(`invalid ${CONFIG_NAMESPACE} stack config (${p.list.length} problem(s)):\n  - ${p.list.join("\n  - ")}`);
    }

    return {
        nodes,
        head,
        workers: nodes.filter((n) => n !== head),
        totalGpus,
        image: { ref, source, sourceNode: source === "host" ? sourceNode : undefined },
        model: { hostPath, containerPath, servedName },
        serve: {
            port: servePort!,
            host: serveHost,
            tensorParallelSize: tp!,
            pipelineParallelSize: pp!,
            gpuMemoryUtilization: util!,
            maxModelLen,
            reasoningParser,
            toolCallParser,
            enableAutoToolChoice,
            trustRemoteCode,
            loadFormat,
            extraArgs,
            shmSize,
            readyTimeoutSeconds: serveReady!,
            maxRestarts: maxRestarts!,
        },
        ray: {
            gcsPort: gcsPort!,
            dashboardPort: dashboardPort!,
            clientPort: clientPort!,
            objectStoreMemoryBytes,
            readyTimeoutSeconds: rayReady!,
        },
        native: { masterPort: masterPort! },
        ssh: { privateKeyPath, knownHostsFile },
        stateDir,
        backend,
    };
}

/** Reads every key of the `vllm-cluster` namespace once and validates it; throws before any resource exists. */
export function loadConfig(): ClusterConfig {
    const cfg = new pulumi.Config(CONFIG_NAMESPACE);
    const raw: Raw = {};
    for (const k of TOP_KEYS) {
        const v = k === "stateDir" || k === "backend" ? cfg.get(k) : cfg.getObject<unknown>(k);
        if (v !== undefined) {
            raw[k] = v;
        }
    }
    return validateConfig(raw);
}

/**
 * Every command line the program runs or hands to Docker is built here, by small pure functions, so that one
 * place knows each flag and the snapshot tests see exactly what a host will execute. Nothing here touches the
 * Pulumi runtime.
 */
import { createHash } from "crypto";

/** Fixed container names: one of each per host, so a second deployment on the same host fails loudly. */
export const RAY_HEAD_CONTAINER = "vllm-ray-head";
export const RAY_WORKER_CONTAINER = "vllm-ray-worker";
export const SERVE_CONTAINER = "vllm-serve";

/** Where the serve container sees the API key file (bind-mounted read-only). */
export const API_KEY_CONTAINER_PATH = "/run/vllm-cluster/api-key";
/** Ray session directory inside the Ray head and serve containers (shared bind mount). */
export const RAY_SESSION_CONTAINER_DIR = "/tmp/ray";
/** The dashboard only ever listens on loopback; operators reach it through an SSH tunnel. */
export const DASHBOARD_HOST = "127.0.0.1";

export const LABEL_PREFIX = "vllm-cluster.";

/** How to reach one host over SSH; the same options serve the system ssh and the docker ssh:// transport. */
export interface SshTarget {
    user: string;
    host: string;
    port: number;
    privateKeyPath: string;
    knownHostsFile: string;
}

/** The facts about one node the builders need (a structural subset of the validated NodeConfig). */
export interface NodeSpec {
    name: string;
    sshHost: string;
    sshUser: string;
    sshPort: number;
    fabricIp: string;
    fabricInterface: string;
    rdmaDevices: string[];
    gpus: number;
    gpuRuntime: "nvidia" | "none";
    unifiedMemory: boolean;
    /** Extra environment for every project container on the node (validated: no managed names). */
    env: Record<string, string>;
}

// ---------------------------------------------------------------------------------------------------------
// quoting and ssh

const SAFE_WORD = /^[A-Za-z0-9_\-.,:/=@%+]+$/;

/** POSIX single-quote quoting; the result is one word in sh, bash and zsh alike. */
export function shellQuote(s: string): string {
    if (s !== "" && SAFE_WORD.test(s)) {
        return s;
    }
    return `'${s.replace(/'/g, `'\\''`)}'`;
}

export function shellJoin(argv: readonly string[]): string {
    return argv.map(shellQuote).join(" ");
}

/**
 * ssh options shared by every remote command and by the docker provider's `sshOpts`. Host keys are always
 * verified against the configured known_hosts file; BatchMode makes a missing key fail instead of prompting.
 */
export function sshOptions(t: Pick<SshTarget, "privateKeyPath" | "knownHostsFile" | "port">): string[] {
    return [
        "-i",
        t.privateKeyPath,
        "-o",
        "IdentitiesOnly=yes",
        "-o",
        `UserKnownHostsFile=${t.knownHostsFile}`,
        "-o",
        "StrictHostKeyChecking=yes",
        "-o",
        "BatchMode=yes",
        "-o",
        "ConnectTimeout=10",
        "-p",
        String(t.port),
    ];
}

/** The docker provider host URL for a node: `ssh://<user>@<host>:<port>`. */
export function dockerHostUrl(t: Pick<SshTarget, "user" | "host" | "port">): string {
    return `ssh://${t.user}@${t.host}:${t.port}`;
}

export function sshTargetOf(
    n: Pick<NodeSpec, "sshUser" | "sshHost" | "sshPort">,
    ssh: { privateKeyPath: string; knownHostsFile: string },
): SshTarget {
    return {
        user: n.sshUser,
        host: n.sshHost,
        port: n.sshPort,
        privateKeyPath: ssh.privateKeyPath,
        knownHostsFile: ssh.knownHostsFile,
    };
}

/** ssh argv that runs `remoteArgv` on the target; the remote login shell sees one safely quoted string. */
export function sshArgv(t: SshTarget, remoteArgv: readonly string[]): string[] {
    return ["ssh", ...sshOptions(t), "--", `${t.user}@${t.host}`, shellJoin(remoteArgv)];
}

/** A local shell command line running `remoteArgv` on the target. */
export function sshCommand(t: SshTarget, remoteArgv: readonly string[]): string {
    return shellJoin(sshArgv(t, remoteArgv));
}

/**
 * A local shell command line that runs `script` on the target under `sh -c` (or `bash -c`), independent of the
 * remote user's login shell. When ssh itself fails (exit 255) the message names the step and the host.
 */
export function remoteScriptCommand(t: SshTarget, step: string, script: string, shell: "sh" | "bash" = "sh"): string {
    const ssh = sshCommand(t, [shell, "-c", script]);
    const where = `${t.user}@${t.host}:${t.port}`;
    return [
        `${ssh}`,
        `rc=$?`,
        `if [ "$rc" -eq 255 ]; then echo ${shellQuote(`${step}: ssh to ${where} failed (unreachable host, key or known_hosts entry)`)} >&2; fi`,
        `exit "$rc"`,
    ].join("\n");
}

// ---------------------------------------------------------------------------------------------------------
// host paths

export function nodeStateDir(stateDir: string, node: string): string {
    return `${stateDir}/${node}`;
}
export function apiKeyHostPath(stateDir: string, node: string): string {
    return `${nodeStateDir(stateDir, node)}/api-key`;
}
export function raySessionHostDir(stateDir: string, node: string): string {
    return `${nodeStateDir(stateDir, node)}/ray`;
}

// ---------------------------------------------------------------------------------------------------------
// preflight

/**
 * Remote script that checks what the seeds found broken by hand: the docker engine answers, the fabric IP is
 * configured on the named interface, no other process holds a host port this node's containers will listen on
 * (`ports`), and (with the nvidia runtime) the GPU count matches. It also creates the node's state dir
 * (<stateDir>/<node>/ray) as the login user. Prints one JSON line of facts: {"node","arch","dockerVersion","gpusSeen"}.
 */
export function preflightScript(n: NodeSpec, stateDir: string, ports: readonly number[]): string {
    const lines = [
        "set -u",
        `node=${shellQuote(n.name)}`,
        `fail() { echo "preflight failed on node $node (${n.sshUser}@${n.sshHost}): $*" >&2; exit 1; }`,
        // Created here, as the login user, before any container: docker would create missing bind-mount
        // sources owned by root, and the API key install (run as the login user) could not write there.
        `mkdir -p ${shellQuote(raySessionHostDir(stateDir, n.name))} && [ -w ${shellQuote(nodeStateDir(stateDir, n.name))} ] || fail ${shellQuote(
            `state dir ${nodeStateDir(stateDir, n.name)} is not writable`,
        )}`,
        `command -v docker >/dev/null 2>&1 || fail "docker CLI not found"`,
        `dver=$(docker version --format '{{.Server.Version}}' 2>&1) || fail "docker engine unreachable: $dver"`,
        `command -v ip >/dev/null 2>&1 || fail "ip (iproute2) not found"`,
        `addrs=$(ip -o -4 addr show dev ${shellQuote(n.fabricInterface)} 2>&1) || fail ${shellQuote(`fabric interface ${n.fabricInterface} not found`)}`,
        `printf '%s\\n' "$addrs" | grep -qF ${shellQuote(`inet ${n.fabricIp}/`)} || fail ${shellQuote(
            `fabric IP ${n.fabricIp} is not on interface ${n.fabricInterface}`,
        )}" (has: $(printf '%s\\n' "$addrs" | awk '{print $4}' | tr '\\n' ' '))"`,
        ...portsFreeLines(ports),
    ];
    if (n.gpuRuntime === "nvidia") {
        lines.push(
            `command -v nvidia-smi >/dev/null 2>&1 || fail "nvidia-smi not found (gpuRuntime is nvidia)"`,
            `gpus=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU ' || true)`,
            `[ "$gpus" -eq ${n.gpus} ] || fail "expected ${n.gpus} GPU(s), nvidia-smi -L lists $gpus"`,
        );
    } else {
        lines.push(`gpus=${n.gpus}`);
    }
    lines.push(
        `arch=$(uname -m)`,
        `printf '{"node":"%s","arch":"%s","dockerVersion":"%s","gpusSeen":%s}\\n' "$node" "$arch" "$dver" "$gpus"`,
    );
    return lines.join("\n");
}

export function preflightCommand(t: SshTarget, n: NodeSpec, stateDir: string, ports: readonly number[]): string {
    return remoteScriptCommand(t, `preflight on node ${n.name}`, preflightScript(n, stateDir, ports));
}

/**
 * Preflight lines (POSIX sh, after `fail` and `node` are defined) that fail naming each port another process
 * already listens on (TCP, any address, from `ss -Hltn`). Our own listeners are accepted: while a project
 * container (label vllm-cluster.managed=true) runs on the host, a held port is taken to be ours, so preflight
 * re-runs against a deployed cluster. Without `ss` the check is skipped with a warning on stderr. No ports: no lines.
 */
function portsFreeLines(ports: readonly number[]): string[] {
    if (ports.length === 0) {
        return [];
    }
    const list = ports.join(" ");
    const skip = `not checking that ports ${list} are free`;
    return [
        `if ! command -v ss >/dev/null 2>&1; then`,
        `    echo "preflight warning on node $node: ss (iproute2) not found; ${skip}" >&2`,
        `elif ! listening=$(ss -Hltn 2>&1); then`,
        `    echo "preflight warning on node $node: ss -Hltn failed ($listening); ${skip}" >&2`,
        `else`,
        `    taken=""`,
        `    for p in ${list}; do`,
        `        printf '%s\\n' "$listening" | grep -Eq ":\${p}[[:space:]]" && taken="$taken $p"`,
        `    done`,
        `    if [ -n "$taken" ]; then`,
        `        ours=$(docker ps --quiet --filter ${shellQuote(`label=${LABEL_PREFIX}managed=true`)} 2>&1) || fail "docker ps failed: $ours"`,
        `        if [ -z "$ours" ]; then`,
        `            msg=""`,
        `            for p in $taken; do msg="$msg; port $p is already in use on the host, not by this project (see who holds it: ss -ltnp 'sport = :$p')"; done`,
        `            fail "\${msg#; }"`,
        `        fi`,
        `    fi`,
        `fi`,
    ];
}

// ---------------------------------------------------------------------------------------------------------
// image distribution

/** Where the image comes from: another host (ssh), the operator's local engine, or a registry pull. */
export type ImageOrigin = { kind: "host"; node: string; target: SshTarget } | { kind: "local" } | { kind: "registry" };

function dockerOn(t: SshTarget | "local", args: readonly string[]): string {
    return t === "local" ? shellJoin(["docker", ...args]) : sshCommand(t, ["docker", ...args]);
}

function inspectIdArgs(ref: string): string[] {
    return ["image", "inspect", "--format", "{{.Id}}", ref];
}

/** Prints the image ID of `ref` on the target, or nothing when the image is absent (read/refresh). */
export function imageInspectScript(t: SshTarget, ref: string): string {
    return [
        "set -uo pipefail",
        `out=$(${dockerOn(t, inspectIdArgs(ref))} 2>&1)`,
        `rc=$?`,
        `if [ "$rc" -eq 0 ]; then printf '%s\\n' "$out"; exit 0; fi`,
        `case "$out" in *"No such image"*|*"no such image"*) exit 0;; esac`,
        `echo ${shellQuote(`inspecting ${ref} on ${t.user}@${t.host} failed:`)}" $out" >&2`,
        `exit "$rc"`,
    ].join("\n");
}

/**
 * bash script that makes `ref` present on `dst` and prints its image ID as the last stdout line.
 * host/local origin: skip when dst already holds the source's ID, else stream
 * `docker save REF | ssh dst docker load` (no temporary file) and verify the loaded ID equals the source ID.
 * registry origin: `docker pull` on dst. If EXPECTED_ID is set in the environment, the result must match it;
 * if HOST_ARCH is set (uname -m of dst), the image architecture must fit it.
 */
export function imageEnsureScript(origin: ImageOrigin, dst: SshTarget, dstNode: string, ref: string): string {
    const q = shellQuote;
    const lines = [
        "set -euo pipefail",
        `fail() { echo "image ${ref} on node ${dstNode}: $*" >&2; exit 1; }`,
        `have=$(${dockerOn(dst, inspectIdArgs(ref))} 2>/dev/null || true)`,
    ];
    if (origin.kind === "registry") {
        lines.push(
            `${dockerOn(dst, ["pull", ref])} >&2 || fail "docker pull failed"`,
            `have=$(${dockerOn(dst, inspectIdArgs(ref))}) || fail "not present after pull"`,
        );
    } else {
        const src: SshTarget | "local" = origin.kind === "host" ? origin.target : "local";
        const srcName = origin.kind === "host" ? `node ${origin.node}` : "the local docker engine";
        lines.push(
            `want=$(${dockerOn(src, inspectIdArgs(ref))} 2>/dev/null) || fail ${q(`source image not present on ${srcName}`)}`,
            `if [ "$have" != "$want" ]; then`,
            `  echo ${q(`streaming ${ref} from ${srcName} to node ${dstNode}`)} >&2`,
            `  ${dockerOn(src, ["save", ref])} | ${dockerOn(dst, ["load"])} >&2 || fail ${q(`docker save | docker load from ${srcName} failed`)}`,
            `  have=$(${dockerOn(dst, inspectIdArgs(ref))}) || fail "not present after docker load"`,
            `  [ "$have" = "$want" ] || fail "loaded ID $have differs from source ID $want"`,
            `fi`,
        );
    }
    lines.push(
        `if [ -n "\${EXPECTED_ID:-}" ] && [ "$have" != "$EXPECTED_ID" ]; then fail "has ID $have, expected $EXPECTED_ID"; fi`,
        // An amd64 image on an aarch64 host (GB10) would only fail later, inside ray start.
        `if [ -n "\${HOST_ARCH:-}" ]; then`,
        `  iarch=$(${dockerOn(dst, ["image", "inspect", "--format", "{{.Architecture}}", ref])}) || fail "cannot read image architecture"`,
        `  case "$HOST_ARCH/$iarch" in aarch64/arm64|arm64/arm64|x86_64/amd64|amd64/amd64) ;; *) fail "image architecture $iarch does not match host architecture $HOST_ARCH";; esac`,
        `fi`,
        `printf '%s\\n' "$have"`,
    );
    return lines.join("\n");
}

// ---------------------------------------------------------------------------------------------------------
// labels

export type ContainerRole = "ray-head" | "ray-worker" | "serve";

export interface LabelArgs {
    stack: string;
    role: ContainerRole;
    node: NodeSpec;
    imageRef: string;
    /** Host ports the container listens on, by name. */
    ports: Record<string, number>;
}

/** Labels every project container carries (the policy pack reads them; names are part of the contract). */
export function containerLabels(a: LabelArgs, extra: Record<string, string> = {}): Record<string, string> {
    const base: Record<string, string> = {
        managed: "true",
        stack: a.stack,
        role: a.role,
        node: a.node.name,
        gpus: String(a.node.gpus),
        "gpu-runtime": a.node.gpuRuntime,
        "unified-memory": String(a.node.unifiedMemory),
        "ssh-port": String(a.node.sshPort),
        ports: JSON.stringify(a.ports),
        "image-ref": a.imageRef,
        ...extra,
    };
    const out: Record<string, string> = {};
    for (const k of Object.keys(base)) {
        out[`${LABEL_PREFIX}${k}`] = base[k];
    }
    return out;
}

export function labelList(labels: Record<string, string>): { label: string; value: string }[] {
    return Object.keys(labels)
        .sort()
        .map((label) => ({ label, value: labels[label] }));
}

// ---------------------------------------------------------------------------------------------------------
// ray containers

export interface RayPorts {
    gcsPort: number;
    dashboardPort: number;
    clientPort: number;
}

/**
 * Environment for every process that does GPU collectives on a node. VLLM_HOST_IP is the fix for the seeds'
 * placement-group failure (vLLM and Ray must agree on the fabric IP); NCCL/GLOO are pinned to the fabric
 * interface; RDMA devices go to NCCL_IB_HCA, or IB is disabled when there are none.
 */
export function nodeEnv(n: NodeSpec): string[] {
    const env = [
        `VLLM_HOST_IP=${n.fabricIp}`,
        `NCCL_SOCKET_IFNAME=${n.fabricInterface}`,
        `GLOO_SOCKET_IFNAME=${n.fabricInterface}`,
        n.rdmaDevices.length > 0 ? `NCCL_IB_HCA=${n.rdmaDevices.join(",")}` : "NCCL_IB_DISABLE=1",
    ];
    if (n.unifiedMemory) {
        // GPU allocations count as host memory on unified-memory hosts; Ray's memory monitor would kill the
        // vLLM workers once the model is loaded.
        env.push("RAY_memory_monitor_refresh_ms=0");
    }
    for (const k of Object.keys(n.env).sort()) {
        env.push(`${k}=${n.env[k]}`);
    }
    return env;
}

/** Explicit entrypoint: images ship their own (the seeds' first failure was an entrypoint conflict). */
export const RAY_ENTRYPOINT = ["/usr/bin/env"];

export interface RayHeadArgs {
    node: NodeSpec;
    ports: RayPorts;
    objectStoreMemoryBytes?: number;
}

export function rayHeadCommand(a: RayHeadArgs): string[] {
    const cmd = [
        "ray",
        "start",
        "--head",
        "--block",
        `--node-ip-address=${a.node.fabricIp}`,
        `--port=${a.ports.gcsPort}`,
        `--num-gpus=${a.node.gpus}`,
        `--dashboard-host=${DASHBOARD_HOST}`,
        `--dashboard-port=${a.ports.dashboardPort}`,
        `--ray-client-server-port=${a.ports.clientPort}`,
        "--disable-usage-stats",
    ];
    if (a.objectStoreMemoryBytes !== undefined) {
        cmd.push(`--object-store-memory=${a.objectStoreMemoryBytes}`);
    }
    return cmd;
}

export function rayHeadPortsLabel(p: RayPorts): Record<string, number> {
    return { gcs: p.gcsPort, dashboard: p.dashboardPort, client: p.clientPort };
}

export interface RayWorkerArgs {
    node: NodeSpec;
    /** `<head fabric IP>:<gcs port>` */
    headAddress: string;
    objectStoreMemoryBytes?: number;
}

export function rayWorkerCommand(a: RayWorkerArgs): string[] {
    const cmd = [
        "ray",
        "start",
        "--block",
        `--address=${a.headAddress}`,
        `--node-ip-address=${a.node.fabricIp}`,
        `--num-gpus=${a.node.gpus}`,
        "--disable-usage-stats",
    ];
    if (a.objectStoreMemoryBytes !== undefined) {
        cmd.push(`--object-store-memory=${a.objectStoreMemoryBytes}`);
    }
    return cmd;
}

/** docker `shmSize` is in MB; config uses docker CLI syntax (64g, 512m). */
export function shmSizeMb(size: string | undefined): number | undefined {
    if (size === undefined) {
        return undefined;
    }
    const m = /^(\d+)([bkmg]?)$/i.exec(size);
    if (!m) {
        throw new Error(`invalid shm size ${JSON.stringify(size)}`);
    }
    const n = Number(m[1]);
    switch (m[2].toLowerCase()) {
        case "g":
            return n * 1024;
        case "m":
            return n;
        case "k":
            return Math.max(1, Math.ceil(n / 1024));
        default:
            return Math.max(1, Math.ceil(n / (1024 * 1024)));
    }
}

// ---------------------------------------------------------------------------------------------------------
// cluster readiness

export interface ClusterReadySpec {
    /** `<head fabric IP>:<gcs port>` */
    address: string;
    nodes: { name: string; fabricIp: string; sshHost: string }[];
    gpus: number;
    timeoutSeconds: number;
}

/**
 * Runs inside the Ray head container. Polls ray.nodes() until every expected node is alive with its fabric IP
 * and the GPU total matches, bounded by timeoutSeconds. Prints one JSON line {"fingerprint","nodes","gpus"};
 * the fingerprint hashes the Ray node IDs, so it changes exactly when a Ray node restarts. On timeout exits 1
 * naming missing hosts and hosts registered with a wrong IP (the seeds' management-IP failure).
 */
export const CLUSTER_PROBE_PY = `import hashlib, json, sys, time
spec = json.loads(sys.argv[1])
def fail(msg):
    print("cluster-ready: " + msg, file=sys.stderr)
    sys.exit(1)
try:
    import ray
    ray.init(address=spec["address"], logging_level="ERROR", log_to_driver=False)
except Exception as e:
    fail("cannot connect to Ray at %s: %s" % (spec["address"], e))
want = dict((n["fabricIp"], n["name"]) for n in spec["nodes"])
mgmt = dict((n["sshHost"], n["name"]) for n in spec["nodes"])
deadline = time.monotonic() + spec["timeoutSeconds"]
while True:
    alive = [n for n in ray.nodes() if n.get("Alive")]
    seen = dict((n["NodeManagerAddress"], n) for n in alive)
    gpus = int(sum(n.get("Resources", {}).get("GPU", 0) for n in alive))
    missing = [ip for ip in want if ip not in seen]
    wrong = [ip for ip in seen if ip not in want]
    if not missing and not wrong and gpus == spec["gpus"]:
        ids = sorted("%s=%s" % (want[ip], seen[ip]["NodeID"]) for ip in seen)
        fp = hashlib.sha256("\\n".join(ids).encode()).hexdigest()[:16]
        print(json.dumps({"fingerprint": fp, "nodes": dict((want[ip], ip) for ip in seen), "gpus": gpus}, sort_keys=True))
        sys.exit(0)
    if time.monotonic() >= deadline:
        parts = []
        if missing:
            parts.append("missing hosts: " + ", ".join("%s (fabric IP %s)" % (want[ip], ip) for ip in missing))
        if wrong:
            parts.append("hosts registered with a wrong IP: " + ", ".join(
                ("%s registered as %s instead of its fabric IP" % (mgmt[ip], ip)) if ip in mgmt else ip for ip in wrong))
        if gpus != spec["gpus"]:
            parts.append("Ray sees %d GPUs, expected %d" % (gpus, spec["gpus"]))
        fail("not ready after %ds: %s" % (spec["timeoutSeconds"], "; ".join(parts)))
    time.sleep(2)
`;

/** Remote script for the head host: `docker exec vllm-ray-head python3 -c <probe> <spec JSON>`. */
export function clusterReadyScript(spec: ClusterReadySpec): string {
    return shellJoin(["docker", "exec", RAY_HEAD_CONTAINER, "python3", "-c", CLUSTER_PROBE_PY, JSON.stringify(spec)]);
}

export function clusterReadyCommand(t: SshTarget, spec: ClusterReadySpec): string {
    return remoteScriptCommand(t, "cluster readiness probe", clusterReadyScript(spec));
}

// ---------------------------------------------------------------------------------------------------------
// vllm serve

/** The `vllm serve` settings an operator configures (infra/config.ts's ServeConfig extends this). */
export interface ServeArgs {
    host: string;
    port: number;
    tensorParallelSize: number;
    pipelineParallelSize: number;
    gpuMemoryUtilization: number;
    maxModelLen?: number;
    reasoningParser?: string;
    toolCallParser?: string;
    enableAutoToolChoice: boolean;
    trustRemoteCode: boolean;
    loadFormat?: string;
    extraArgs: string[];
}

export interface ServeSpec extends ServeArgs {
    modelContainerPath: string;
    servedName: string;
}

/** Exit status of the serve entrypoint when there is no usable API key (EX_CONFIG). */
export const NO_API_KEY_EXIT = 78;

/**
 * Reads the key from the read-only mounted file into the environment of the exec'd process only, so it is in
 * neither the container's Cmd nor its Env (`docker inspect`, `ps`). Fails closed: without a readable, non-empty
 * regular file (missing, a directory that a bind mount made in its place, unreadable, empty) the server is never
 * started, because vLLM with an empty VLLM_API_KEY serves everyone.
 */
export const SERVE_ENTRYPOINT = [
    "/bin/sh",
    "-c",
    [
        `f=${API_KEY_CONTAINER_PATH}`,
        `k=`,
        `if [ -f "$f" ] && [ -r "$f" ]; then k="$(cat "$f")"; fi`,
        `if [ -z "$k" ]; then echo "vllm-serve: no API key in $f (missing, not a file, unreadable or empty); refusing to serve without one" >&2; exit ${NO_API_KEY_EXIT}; fi`,
        `VLLM_API_KEY="$k" exec "$@"`,
    ].join("; "),
    "vllm-serve",
];

/**
 * `vllm serve <model> --flag value ...`, each flag and value its own element; `distributed` (the executor backend
 * and, for the native backend, the multi-node flags) goes right after the parallelism it serves.
 */
function serveArgv(s: ServeSpec, distributed: string[]): string[] {
    const cmd = [
        "vllm",
        "serve",
        s.modelContainerPath,
        "--served-model-name",
        s.servedName,
        "--host",
        s.host,
        "--port",
        String(s.port),
        "--tensor-parallel-size",
        String(s.tensorParallelSize),
        "--pipeline-parallel-size",
        String(s.pipelineParallelSize),
        ...distributed,
        "--gpu-memory-utilization",
        String(s.gpuMemoryUtilization),
    ];
    if (s.maxModelLen !== undefined) {
        cmd.push("--max-model-len", String(s.maxModelLen));
    }
    if (s.reasoningParser !== undefined) {
        cmd.push("--reasoning-parser", s.reasoningParser);
    }
    if (s.toolCallParser !== undefined) {
        cmd.push("--tool-call-parser", s.toolCallParser);
    }
    if (s.enableAutoToolChoice) {
        cmd.push("--enable-auto-tool-choice");
    }
    if (s.trustRemoteCode) {
        cmd.push("--trust-remote-code");
    }
    if (s.loadFormat !== undefined) {
        cmd.push("--load-format", s.loadFormat);
    }
    return [...cmd, ...s.extraArgs];
}

/** `vllm serve <model> --flag value ...` for the ray backend, each flag and value its own element. */
export function serveCommand(s: ServeSpec): string[] {
    // Without it a multi-node TP run does not use the Ray cluster (seeds' second failure).
    return serveArgv(s, ["--distributed-executor-backend", "ray"]);
}

/** One rank of the native backend: which node it is and where rank 0's rendezvous listens. */
export interface NativeRank {
    /** 0 on the head (serves the API), 1..nnodes-1 on the other nodes in config order (headless). */
    nodeRank: number;
    nnodes: number;
    /** The head's fabric IP. */
    masterAddr: string;
    masterPort: number;
}

/**
 * `vllm serve` for vLLM's own multi-node without Ray (backend native). Every node runs the same serve command with
 * its own `--node-rank`; TP x PP spans all nodes' GPUs exactly as with Ray. Rank 0 serves the API, every other
 * rank runs `--headless` (engine only, no API server) and joins rank 0 at `--master-addr`/`--master-port`.
 * vLLM docs, "Parallelism and Scaling", section "Running vLLM with MultiProcessing":
 * https://docs.vllm.ai/en/latest/serving/parallelism_scaling.html (example: `--tensor-parallel-size 8
 * --pipeline-parallel-size 2 --nnodes 2 --node-rank 0 --master-addr <HEAD_NODE_IP>` on the head, the same with
 * `--node-rank 1 ... --headless` on the other node). `--master-port` is the matching engine argument for the
 * rendezvous port; it is always passed so the port checked by config validation and the policy pack is the one
 * used. `--distributed-executor-backend mp` is passed explicitly so an image that does ship Ray is not steered to it.
 */
export function nativeServeCommand(s: ServeSpec, r: NativeRank): string[] {
    const distributed = [
        "--distributed-executor-backend",
        "mp",
        "--nnodes",
        String(r.nnodes),
        "--node-rank",
        String(r.nodeRank),
        "--master-addr",
        r.masterAddr,
        "--master-port",
        String(r.masterPort),
    ];
    if (r.nodeRank > 0) {
        distributed.push("--headless");
    }
    return serveArgv(s, distributed);
}

/** Explicit entrypoint for headless ranks (no API, so no key): an image's own entrypoint never runs. */
export const HEADLESS_ENTRYPOINT = ["/usr/bin/env"];

/**
 * The native backend's counterpart of the Ray cluster fingerprint: a hash of every rank's container ID, so it
 * changes exactly when any rank's container was replaced.
 */
export function joinFingerprint(rankContainerIds: readonly string[]): string {
    return createHash("sha256").update(rankContainerIds.join("\n")).digest("hex").slice(0, 16);
}

/** Serve runs on the head host as a Ray driver: it needs the head's env plus the Ray address. */
export function serveEnv(head: NodeSpec, rayAddress: string): string[] {
    return [...nodeEnv(head), `RAY_ADDRESS=${rayAddress}`];
}

/**
 * Installs the API key on the host: the key arrives on stdin (never argv), files are created under umask 077
 * and moved into place atomically. Prints the key file path.
 */
export function apiKeyInstallScript(stateDir: string, node: string): string {
    const dir = nodeStateDir(stateDir, node);
    const file = apiKeyHostPath(stateDir, node);
    return [
        "set -eu",
        "umask 077",
        `mkdir -p ${shellQuote(dir)}`,
        `tmp=${shellQuote(`${dir}/.api-key.`)}$$`,
        // A bind mount of a missing key file makes an empty directory in its place; mv would then move the key
        // into it. Remove such a directory; refuse anything else that is not a regular file.
        `if [ -d ${shellQuote(file)} ]; then rmdir ${shellQuote(file)} 2>/dev/null || { echo ${shellQuote(
            `api key install on node ${node}: ${file} is a non-empty directory; remove it`,
        )} >&2; exit 1; }; fi`,
        `cat > "$tmp"`,
        `if [ ! -s "$tmp" ]; then rm -f "$tmp"; echo ${shellQuote(`api key install on node ${node}: empty key on stdin`)} >&2; exit 1; fi`,
        `chmod 600 "$tmp"`,
        `mv -f "$tmp" ${shellQuote(file)}`,
        `echo ${shellQuote(file)}`,
    ].join("\n");
}

/**
 * A short one-way hash of the API key, carried by the serve container as a label so that a new key replaces the
 * server (which reads the key only at start). A 48-character random key cannot be recovered from it.
 */
export function apiKeyHash(key: string): string {
    return createHash("sha256").update(`vllm-cluster api key\n${key}`).digest("hex").slice(0, 16);
}

export function apiKeyRemoveScript(stateDir: string, node: string): string {
    return `rm -f ${shellQuote(apiKeyHostPath(stateDir, node))}`;
}

/** Local command installing the key on the node; the key is its stdin. */
export function apiKeyInstallCommand(t: SshTarget, stateDir: string, node: string): string {
    return remoteScriptCommand(t, `api key install on node ${node}`, apiKeyInstallScript(stateDir, node));
}

export function apiKeyRemoveCommand(t: SshTarget, stateDir: string, node: string): string {
    return remoteScriptCommand(t, `api key removal on node ${node}`, apiKeyRemoveScript(stateDir, node));
}

export interface ServeReadinessSpec {
    node: string;
    port: number;
    servedName: string;
    apiKeyFile: string;
    timeoutSeconds: number;
    /** Seconds between /health polls. */
    intervalSeconds?: number;
}

/** The readiness check for serve on `node`: its port and model name, the key file the install wrote. */
export function serveReadinessSpec(
    node: string,
    serve: Pick<ServeSpec, "port" | "servedName">,
    stateDir: string,
    timeoutSeconds: number,
): ServeReadinessSpec {
    return { node, port: serve.port, servedName: serve.servedName, apiKeyFile: apiKeyHostPath(stateDir, node), timeoutSeconds };
}

/**
 * bash script run on the head host: poll /health (bounded; fails early if the container died), then send one
 * real chat completion authenticated with the key read from the key file. The Authorization header reaches
 * curl through a config file on a process substitution, so the key is never on a command line.
 */
export function serveReadinessScript(s: ServeReadinessSpec): string {
    const q = shellQuote;
    const body = JSON.stringify({
        model: s.servedName,
        messages: [{ role: "user", content: "Reply with the single word: ready" }],
        max_tokens: 8,
        temperature: 0,
    });
    const where = `${SERVE_CONTAINER} on node ${s.node}`;
    return [
        "set -uo pipefail",
        `base=${q(`http://127.0.0.1:${s.port}`)}`,
        `keyfile=${q(s.apiKeyFile)}`,
        `deadline=$(( $(date +%s) + ${s.timeoutSeconds} ))`,
        `logs() { docker logs --tail 40 ${SERVE_CONTAINER} 2>&1 | sed 's/^/  | /' >&2 || true; }`,
        `fail() { echo "${where}: $*" >&2; logs; exit 1; }`,
        `auth() { printf 'header = "Authorization: Bearer %s"\\n' "$(cat "$keyfile")"; }`,
        `[ -r "$keyfile" ] || fail "API key file $keyfile is missing or unreadable"`,
        `code=000`,
        `while :; do`,
        `  code=$(curl -s -o /dev/null -w '%{http_code}' --max-time 5 "$base/health" || true)`,
        `  [ "$code" = 200 ] && break`,
        `  state=$(docker inspect -f '{{.State.Status}}' ${SERVE_CONTAINER} 2>/dev/null || echo missing)`,
        `  case "$state" in exited|dead|missing) fail "container is $state before /health answered";; esac`,
        `  [ "$(date +%s)" -lt "$deadline" ] || fail "/health did not return 200 within ${s.timeoutSeconds}s (last HTTP $code, container $state)"`,
        `  sleep ${s.intervalSeconds ?? 5}`,
        `done`,
        `left=$(( deadline - $(date +%s) )); [ "$left" -ge 30 ] || left=30`,
        `resp=$(curl -sS --max-time "$left" -K <(auth) -H 'Content-Type: application/json' -d ${q(body)} -w '\\n%{http_code}' "$base/v1/chat/completions") || fail "chat completion request failed"`,
        `code=\${resp##*$'\\n'}`,
        `[ "$code" = 200 ] || fail "chat completion returned HTTP $code"`,
        `case "$resp" in *'"choices"'*) ;; *) fail "chat completion answer has no choices";; esac`,
        // Fail closed: a server that answers without the key is not ready, it is open.
        `code=$(curl -s -o /dev/null -w '%{http_code}' --max-time 30 -H 'Content-Type: application/json' -d ${q(body)} "$base/v1/chat/completions" || true)`,
        `[ "$code" = 401 ] || fail "a chat completion without the API key returned HTTP $code, not 401: the server does not enforce its key"`,
        `printf '{"ready":true,"node":"%s","port":%s}\\n' ${q(s.node)} ${s.port}`,
    ].join("\n");
}

export function serveReadinessCommand(t: SshTarget, s: ServeReadinessSpec): string {
    return remoteScriptCommand(t, `serve readiness on node ${s.node}`, serveReadinessScript(s), "bash");
}

/** Operator hint for the loopback-only dashboard. */
export function dashboardTunnelHint(t: Pick<SshTarget, "user" | "host" | "port">, dashboardPort: number): string {
    const port = t.port === 22 ? "" : ` -p ${t.port}`;
    return `ssh -L ${dashboardPort}:${DASHBOARD_HOST}:${dashboardPort}${port} ${t.user}@${t.host}`;
}

/**
 * Stand-in hosts for the status view's tests: a two-host cluster's outputs, and per host a directory with the
 * init's files and stand-in `docker` and `curl` that answer as the engine and vLLM would (recording every call),
 * plus a stand-in `ssh` that runs the remote command on this machine as a host's login shell would, with that
 * host's stand-ins first on PATH, and a stand-in `pulumi` that prints the outputs.
 */
import * as fs from "fs";
import * as os from "os";
import * as path from "path";
import type { StatusNode, StatusSpec } from "../../infra/builders/status";

export const ROOT = path.join(__dirname, "..", "..");
export const FIXTURES = path.join(__dirname, "fixtures", "status");

/** What ray_members.py prints for the two simulated hosts, both live on their fabric IPs. */
export const RAY_MEMBERS =
    '{"members": [{"gpus": 1.0, "head": true, "ip": "10.232.0.11"}, {"gpus": 1.0, "head": false, "ip": "10.232.0.12"}], "via": "gcs"}\n';

export const NODES: StatusNode[] = [
    {
        name: "spark-1",
        role: "head",
        sshHost: "10.231.0.11",
        sshUser: "root",
        sshPort: 22,
        fabricIp: "10.232.0.11",
        gpus: 1,
        memoryFloorKib: 4194304,
    },
    {
        name: "spark-2",
        role: "worker",
        sshHost: "10.231.0.12",
        sshUser: "root",
        sshPort: 22,
        fabricIp: "10.232.0.12",
        gpus: 1,
        memoryFloorKib: 0,
    },
];

/** The `status` output of a default cluster of stack `test` whose hosts keep their state under `stateDir`. */
export function statusSpec(stateDir: string, over: Partial<StatusSpec> = {}): StatusSpec {
    return {
        stack: "test",
        cluster: "vllm",
        defaultCluster: true,
        backend: "ray",
        stateDir,
        privateKeyPath: "/home/op/.ssh/id_ed25519",
        knownHostsFile: "/home/op/.ssh/known_hosts",
        modelPath: path.join(stateDir, "models", "tiny-qwen2"),
        servedModelName: "tiny-qwen2",
        port: 8000,
        tls: true,
        rayHead: "vllm-ray-head",
        serve: "vllm-serve",
        gcsPort: 6379,
        nodes: NODES,
        ...over,
    };
}

/** The stack's outputs as `pulumi stack output --json` prints them (the API key stays "[secret]"). */
export function outputsOf(stateDir: string, over: Record<string, unknown> = {}) {
    return {
        endpoint: "https://10.231.0.11:8000/v1",
        servedModelName: "tiny-qwen2",
        apiKey: "[secret]",
        nodes: NODES.map((n) => ({ name: n.name, role: n.role, sshHost: n.sshHost, fabricIp: n.fabricIp, gpus: n.gpus })),
        status: statusSpec(stateDir),
        ...over,
    };
}

/** A 64-hex container ID made of one repeated digit. */
export const cid = (d: string) => d.repeat(64);

/** One container as the probe's `docker inspect --format` prints it (docker's json function: no spaces). */
export function inspectLine(c: {
    id: string;
    name: string;
    /** LABEL.cluster: none on the stack program's cluster. */
    cluster?: string;
    role: string;
    rank?: string;
    state?: string;
    startedAt?: string;
    exitCode?: number;
    restarts?: number;
    maxStarts?: number;
}): string {
    return JSON.stringify({
        id: c.id,
        name: `/${c.name}`,
        cluster: c.cluster ?? "",
        role: c.role,
        rank: c.rank ?? "",
        state: c.state ?? "running",
        startedAt: c.startedAt ?? "2026-12-04T08:00:00.123456789Z",
        finishedAt: c.state === "exited" ? "2026-12-04T09:55:00.5Z" : "0001-01-01T00:00:00Z",
        exitCode: c.exitCode ?? 0,
        oomKilled: false,
        restartCount: c.restarts ?? 0,
        initArgs: c.maxStarts === undefined ? [null] : [`max-starts=${c.maxStarts}`, null],
    });
}

export interface StandIn {
    dir: string;
    /** The host's init directory (<stateDir>/<node>/init). */
    init: string;
    bin: string;
    /** Every docker and curl call, one line each ("docker ps -a ..."). */
    calls(): string[];
}

/** A script file. */
export function script(file: string, body: string): void {
    fs.writeFileSync(file, `#!/bin/sh\n${body}\n`, { mode: 0o755 });
}

/**
 * A host's stand-ins under `root`/<node>: docker lists `ps` (container IDs) and prints
 * `inspect` (one line per container), `exec` prints `ray` and exits `rayCode`; curl prints `metrics` (exit 7, no
 * server, when undefined).
 */
export function standInHost(
    stateDir: string,
    node: string,
    h: { ps: string[]; inspect: string[]; ray?: string; rayCode?: number; metrics?: string; dockerError?: string },
): StandIn {
    const dir = path.join(stateDir, ".standin", node);
    const bin = path.join(dir, "bin");
    const init = path.join(stateDir, node, "init");
    for (const d of [bin, init, path.join(stateDir, "models")]) fs.mkdirSync(d, { recursive: true });
    fs.writeFileSync(path.join(dir, "ps"), h.ps.map((l) => `${l}\n`).join(""));
    fs.writeFileSync(path.join(dir, "inspect"), h.inspect.map((l) => `${l}\n`).join(""));
    fs.writeFileSync(path.join(dir, "ray"), h.ray ?? "");
    fs.writeFileSync(path.join(dir, "metrics"), h.metrics ?? "");
    const log = path.join(dir, "calls");
    const d = JSON.stringify(dir);
    script(
        path.join(bin, "docker"),
        [
            // one line per call (the Ray probe's script is an argument of many lines)
            `{ printf 'docker %s' "$*" | tr '\\n' ' '; echo; } >> ${JSON.stringify(log)}`,
            h.dockerError !== undefined ? `echo ${JSON.stringify(h.dockerError)} >&2; exit 1` : "",
            `case "$1" in`,
            `  ps) cat ${d}/ps ;;`,
            `  inspect) cat ${d}/inspect ;;`,
            `  exec) cat ${d}/ray; exit ${h.rayCode ?? 0} ;;`,
            `  *) echo "stand-in docker: not a read-only command: $1" >&2; exit 2 ;;`,
            `esac`,
        ].join("\n"),
    );
    script(
        path.join(bin, "curl"),
        [
            `echo "curl $*" >> ${JSON.stringify(log)}`,
            h.metrics === undefined
                ? `echo "curl: (7) Failed to connect to 127.0.0.1 port 8000: Connection refused" >&2; exit 7`
                : `cat ${d}/metrics`,
        ].join("\n"),
    );
    return {
        dir,
        init,
        bin,
        calls: () => (fs.existsSync(log) ? fs.readFileSync(log, "utf8").trim().split("\n") : []),
    };
}

/** A fresh directory for one test's hosts. */
export function tempState(prefix: string): string {
    return fs.mkdtempSync(path.join(os.tmpdir(), prefix));
}

/** What the stand-in ssh does for a host: run the probe with that host's stand-ins, refuse, or never answer. */
export type SshBehaviour = { bin: string } | { refuse: string } | { hang: true } | { flood: string };

/**
 * A directory with stand-in `ssh` and `pulumi` (first on PATH): ssh acts per `user@host` as `hosts` says and logs
 * each call; pulumi prints `outputs` (or fails with `pulumiError`) and logs its arguments. Hung ssh processes write
 * their pid to <dir>/hung.
 */
export function standInClient(
    dir: string,
    hosts: Record<string, SshBehaviour>,
    pulumi: { outputs?: unknown; error?: string } = {},
): { bin: string; log: () => string[] } {
    const bin = path.join(dir, "client");
    fs.mkdirSync(bin, { recursive: true });
    const log = path.join(dir, "client.log");
    const cases = Object.entries(hosts).map(([target, b]) => {
        if ("bin" in b) return `  ${target}) PATH=${JSON.stringify(b.bin)}:$PATH exec sh -c "$2" ;;`;
        if ("refuse" in b) return `  ${target}) echo ${JSON.stringify(b.refuse)} >&2; exit 255 ;;`;
        if ("flood" in b) return `  ${target}) exec yes ${JSON.stringify(b.flood)} ;;`;
        return `  ${target}) echo $$ >> ${JSON.stringify(path.join(dir, "hung"))}; exec sleep 60 ;;`;
    });
    script(
        path.join(bin, "ssh"),
        [
            // ssh [options] -- user@host COMMAND: COMMAND goes to sh -c, as sshd hands it to the login shell
            'while [ $# -gt 0 ]; do case "$1" in --) shift; break ;; *) shift ;; esac; done',
            `echo "ssh $1" >> ${JSON.stringify(log)}`,
            'case "$1" in',
            ...cases,
            '  *) echo "stand-in ssh: no host $1" >&2; exit 255 ;;',
            "esac",
        ].join("\n"),
    );
    // as `pulumi stack export` prints a state: the stack resource's outputs, a secret as its ciphertext
    const outputs = pulumi.outputs ?? {};
    const withCipher = Object.fromEntries(
        Object.entries(outputs).map(([k, v]) => [
            k,
            v === "[secret]" ? { "4dabf18193072939515e22adb298388d": "1b47061264138c4ac30d75fd1eb44270", ciphertext: "v1:abc" } : v,
        ]),
    );
    const deployment = {
        version: 3,
        deployment: {
            resources: Object.keys(outputs).length
                ? [
                      {
                          urn: "urn:pulumi:test::vllm-cluster::pulumi:pulumi:Stack::vllm-cluster-test",
                          type: "pulumi:pulumi:Stack",
                          outputs: withCipher,
                      },
                  ]
                : [],
        },
    };
    fs.writeFileSync(path.join(dir, "outputs.json"), JSON.stringify(deployment));
    script(
        path.join(bin, "pulumi"),
        [
            `echo "pulumi $*" >> ${JSON.stringify(log)}`,
            pulumi.error !== undefined
                ? `echo ${JSON.stringify(pulumi.error)} >&2; exit 255`
                : `cat ${JSON.stringify(path.join(dir, "outputs.json"))}`,
        ].join("\n"),
    );
    return { bin, log: () => (fs.existsSync(log) ? fs.readFileSync(log, "utf8").trim().split("\n") : []) };
}

/** A serving head (Ray head and serve; /metrics as `metrics` says) and a worker whose Ray container stopped. */
export function twoHosts(stateDir: string, metrics = fs.readFileSync(path.join(FIXTURES, "metrics-1.txt"), "utf8")): StandIn[] {
    const head = standInHost(stateDir, "spark-1", {
        ps: [cid("a"), cid("b")],
        inspect: [
            inspectLine({ id: cid("a"), name: "vllm-ray-head", role: "ray-head", maxStarts: 4 }),
            inspectLine({ id: cid("b"), name: "vllm-serve", role: "serve", maxStarts: 4, restarts: 1 }),
        ],
        ray: RAY_MEMBERS,
        metrics,
    });
    fs.writeFileSync(path.join(head.init, "vllm-serve.status"), `${cid("b")} healthy\n`);
    fs.writeFileSync(path.join(head.init, "vllm-serve.starts"), `${cid("b")} 0\n`);
    const worker = standInHost(stateDir, "spark-2", {
        ps: [cid("c")],
        inspect: [inspectLine({ id: cid("c"), name: "vllm-ray-worker", role: "ray-worker", state: "exited", exitCode: 137, maxStarts: 4 })],
    });
    fs.writeFileSync(path.join(worker.init, "vllm-ray-worker.status"), `${cid("c")} exited with 137 (start 1 of at most 4)\n`);
    fs.writeFileSync(path.join(worker.init, "vllm-ray-worker.starts"), `${cid("c")} 1\n`);
    return [head, worker];
}

/** The two DGX Sparks of stacks/Pulumi.spark.yaml, as the outputs list them: what the recorded probe answers are from. */
export const SPARK_NODES: StatusNode[] = [
    {
        name: "spark-1",
        role: "head",
        sshHost: "10.1.230.180",
        sshUser: "aurora",
        sshPort: 22,
        fabricIp: "192.168.200.12",
        gpus: 1,
        memoryFloorKib: 4194304,
    },
    {
        name: "spark-2",
        role: "worker",
        sshHost: "10.1.230.181",
        sshUser: "aurora",
        sshPort: 22,
        fabricIp: "192.168.200.13",
        gpus: 1,
        memoryFloorKib: 4194304,
    },
];

/** The outputs of the `spark` stack (unified memory: a floor of 4 GiB on each node). */
export function sparkOutputs() {
    return outputsOf("/home/aurora/.local/state/vllm-cluster", {
        endpoint: "https://10.1.230.180:8001/v1",
        servedModelName: "qwen3.5-122b-a10b-fp8",
        nodes: SPARK_NODES.map((n) => ({ name: n.name, role: n.role, sshHost: n.sshHost, fabricIp: n.fabricIp, gpus: n.gpus })),
        status: statusSpec("/home/aurora/.local/state/vllm-cluster", {
            stack: "spark",
            privateKeyPath: "/home/you/.ssh/id_ed25519",
            knownHostsFile: "/home/you/.ssh/known_hosts",
            modelPath: "/home/aurora/models/Qwen3.5-122B-A10B-FP8",
            servedModelName: "qwen3.5-122b-a10b-fp8",
            port: 8001,
            nodes: SPARK_NODES,
        }),
    });
}

import { spawnSync } from "child_process";
import * as fs from "fs";
import * as os from "os";
import * as path from "path";
import type { ServeConfig } from "../../infra/config";
import { imageEnsureScript, imageInspectScript } from "../../infra/builders/image";
import { apiKeyFile, apiKeyHash, secretInstallStep } from "../../infra/builders/key";
import { containerLabels } from "../../infra/builders/labels";
import { nodeEnv } from "../../infra/builders/node";
import { shellJoin, shellPath, shellQuote } from "../../infra/builders/quote";
import { knownHostsLookupScript } from "../../infra/builders/chain";
import { clusterReadyCommand, clusterReadyStep, dashboardTunnelHint, rayHeadCommand, rayWorkerCommand } from "../../infra/builders/ray";
import { launchTimings, serveReadinessStep } from "../../infra/builders/readiness";
import { localStepArgv, scriptFile } from "../../infra/builders/remoteStep";
import { shmSizeMb } from "../../infra/builders/containers";
import { SHARED_SSH_PERSIST_S, SshTarget, dockerHostUrl, sshArgv, sshCommand, sshOptions } from "../../infra/builders/ssh";
import { NO_API_KEY_EXIT, SERVE_ENTRYPOINT, joinFingerprint, nativeServeCommand, serveCommand } from "../../infra/builders/vllm";
import { sim, spark1, target } from "./nodes";

/** The API guard's module, as the serve container gets it. */
const GUARD_PY = scriptFile("vllm_cluster_guard.py").text;

/** argv of the API key's install step, run as a file on this machine. */
const apiKeyInstall = (stateDir: string, node: string) => localStepArgv(secretInstallStep(apiKeyFile(stateDir, node)));

/** Where every container of a node keeps its compile caches (the node's cache directory is mounted there). */
const CACHE_ENV = [
    "VLLM_CACHE_ROOT=/var/cache/vllm-cluster/vllm",
    "TORCHINDUCTOR_CACHE_DIR=/var/cache/vllm-cluster/torchinductor",
    "TRITON_CACHE_DIR=/var/cache/vllm-cluster/triton",
    "CUDA_CACHE_PATH=/var/cache/vllm-cluster/nv",
];

/** What sh makes of a command line: the argv it would pass to a program. */
function argvAfterShell(cmdline: string): string[] {
    const out = spawnSync("sh", ["-c", `f() { for a in "$@"; do printf '%s\\0' "$a"; done; }; f ${cmdline}`], {
        encoding: "utf8",
    });
    expect(out.status).toBe(0);
    return out.stdout.split("\0").slice(0, -1);
}

function syntaxOk(shell: "sh" | "bash", script: string): void {
    const r = spawnSync(shell, ["-n", "-c", script], { encoding: "utf8" });
    expect(r.stderr).toBe("");
    expect(r.status).toBe(0);
}

describe("shell quoting", () => {
    const nasty = ["plain", "", "with space", "it's", `"double" $HOME \`id\` \\ back`, "a\nb", "*", "--flag=x y", "{{.Id}}"];

    test("round-trips through sh exactly", () => {
        expect(argvAfterShell(shellJoin(nasty))).toEqual(nasty);
    });

    test("safe words stay unquoted, others are single-quoted", () => {
        expect(shellQuote("10.1.230.180")).toBe("10.1.230.180");
        expect(shellQuote("--port=8001")).toBe("--port=8001");
        expect(shellQuote("it's")).toBe(`'it'\\''s'`);
        expect(shellQuote("")).toBe("''");
    });

    test("a path with ~/ is the user's home to ssh-add and ssh-keygen too (they do not expand ~ themselves)", () => {
        const home = fs.mkdtempSync(path.join(os.tmpdir(), "home-"));
        fs.mkdirSync(path.join(home, ".ssh"));
        fs.writeFileSync(path.join(home, ".ssh", "known hosts"), "10.1.230.180 ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIOx7\n");
        expect(shellPath("/etc/x y")).toBe("'/etc/x y'");
        const r = spawnSync("sh", ["-c", `cat ${shellPath("~/.ssh/known hosts")}`], {
            encoding: "utf8",
            env: { ...process.env, HOME: home },
        });
        expect(r.stdout).toContain("10.1.230.180 ssh-ed25519");
        // the chain's known_hosts lookup of a stack whose knownHostsFile is ~/.ssh/... (the spark stack's)
        const lookup = knownHostsLookupScript({ ...target, host: "10.1.230.180", port: 22, knownHostsFile: "~/.ssh/known hosts" });
        const found = spawnSync("sh", ["-c", lookup], { encoding: "utf8", env: { ...process.env, HOME: home } });
        expect(found.stdout).toContain("10.1.230.180 ssh-ed25519");
        fs.rmSync(home, { recursive: true });
    });

    test("a script nested in sh -c inside ssh survives both shells", () => {
        const script = `printf '%s|' "it's" "$((1+1))"`;
        const argv = sshArgv(target, ["sh", "-c", script]);
        const remote = argvAfterShell(shellJoin(argv)).pop()!;
        // the remote login shell parses `remote`: it must yield sh -c <script> again
        expect(argvAfterShell(remote)).toEqual(["sh", "-c", script]);
    });
});

describe("ssh", () => {
    test("options are shared with the docker provider and verify host keys", () => {
        expect(sshOptions(target)).toEqual([
            "-F",
            "none",
            "-i",
            "~/.ssh/id_ed25519",
            "-o",
            "IdentitiesOnly=yes",
            "-o",
            "UserKnownHostsFile=~/.ssh/known_hosts",
            "-o",
            "GlobalKnownHostsFile=/dev/null",
            "-o",
            "StrictHostKeyChecking=yes",
            "-o",
            "BatchMode=yes",
            "-o",
            "ConnectTimeout=10",
            "-p",
            "22",
        ]);
        expect(dockerHostUrl(target)).toBe("ssh://aurora@10.1.230.180:22");
        expect(sshArgv(target, ["docker", "ps"]).slice(-3)).toEqual(["--", "aurora@10.1.230.180", "docker ps"]);
    });

    test("the real ssh reads no ssh_config with them: no system settings, no global known_hosts, no agent or proxy", () => {
        const r = spawnSync("ssh", ["-G", ...sshOptions({ ...target, privateKeyPath: "/k", knownHostsFile: "/kh" }), "aurora@h"], {
            encoding: "utf8",
        });
        expect(r.status).toBe(0);
        const cfg = r.stdout.split("\n");
        expect(cfg).toContain("userknownhostsfile /kh");
        expect(cfg).toContain("globalknownhostsfile /dev/null");
        expect(cfg).toContain("stricthostkeychecking true");
        expect(cfg).toContain("forwardagent no");
        expect(cfg.filter((l) => /^(proxycommand|proxyjump|sendenv|include) /.test(l))).toEqual([]);
        // what a system ssh_config would set (Debian's sets SendEnv and HashKnownHosts yes) stays at ssh's default
        expect(cfg).toContain("hashknownhosts no");
    });

    describe("shared connections", () => {
        /** The stand-in's directories, removed once these tests are done. */
        const made: string[] = [];
        const tmpDir = (): string => {
            const d = fs.mkdtempSync(path.join(os.tmpdir(), "vcl-ssh-"));
            made.push(d);
            return d;
        };
        afterAll(() => {
            for (const d of made) fs.rmSync(d, { recursive: true, force: true });
        });
        /** Runs `script` with sh (nested in a second sh when `nested`), a stand-in ssh on PATH that records its argv. */
        function runWithFakeSsh(script: string, nested = false, cacheHome?: string): { calls: string[][]; cache: string } {
            const dir = tmpDir();
            const bin = path.join(dir, "bin");
            fs.mkdirSync(bin);
            fs.writeFileSync(
                path.join(bin, "ssh"),
                `#!/bin/sh\nfor a in "$@"; do printf '%s\\0' "$a"; done >>"$SSH_LOG"\nprintf '\\n' >>"$SSH_LOG"\necho out\n`,
                { mode: 0o755 },
            );
            const log = path.join(dir, "ssh.log");
            const cache = cacheHome ?? path.join(dir, "c");
            const argv = nested ? ["-c", `sh -c ${shellQuote(script)}`] : ["-c", script];
            const r = spawnSync("sh", argv, {
                encoding: "utf8",
                env: { ...process.env, PATH: `${bin}:${process.env.PATH}`, SSH_LOG: log, XDG_CACHE_HOME: cache },
            });
            expect(r.stderr).toBe("");
            expect(r.status).toBe(0);
            const calls = fs
                .readFileSync(log, "utf8")
                .split("\n")
                .filter(Boolean)
                .map((l) => l.split("\0").slice(0, -1));
            return { calls, cache };
        }
        const option = (argv: string[], name: string) =>
            argv.flatMap((a, i) => (argv[i - 1] === "-o" && a.startsWith(`${name}=`) ? [a.slice(name.length + 1)] : []));

        test("control sessions of one provider process share one master, in a private directory; bulk streams do not", () => {
            const shared = sshCommand(target, ["docker", "image", "inspect", "x y"]);
            const bulk = sshCommand(target, ["docker", "load"], false);
            // wherever a simple command may stand: alone, in $(...), in a pipeline, after &&
            const script = [shared, `v=$(${shared})`, `${shared} | cat >/dev/null`, `true && ${shared}`, bulk].join("\n");
            syntaxOk("sh", script);
            syntaxOk("bash", script);
            const { calls, cache } = runWithFakeSsh(script);
            expect(calls).toHaveLength(5);
            const paths = calls.slice(0, 4).map((c) => option(c, "ControlPath"));
            // $PPID of the shell is the process that runs the command (here: this test), one socket for all four
            expect(new Set(paths.map((p) => p.join()))).toEqual(new Set([`${cache}/vllm-cluster/ssh/${process.pid}-%C`]));
            for (const c of calls.slice(0, 4)) {
                expect(option(c, "ControlMaster")).toEqual(["auto"]);
                expect(option(c, "ControlPersist")).toEqual([String(SHARED_SSH_PERSIST_S)]);
                // host keys are checked exactly as without sharing, and the remote command arrives intact
                expect(option(c, "StrictHostKeyChecking")).toEqual(["yes"]);
                expect(c.slice(-3)).toEqual(["--", "aurora@10.1.230.180", "docker image inspect 'x y'"]);
            }
            expect(fs.statSync(`${cache}/vllm-cluster/ssh`).mode & 0o777).toBe(0o700);
            expect(option(calls[4], "ControlPath")).toEqual(["none"]);
            expect(option(calls[4], "ControlMaster")).toEqual([]);
        });

        test("a cache directory too long for a socket path: each session connects on its own", () => {
            const long = path.join(tmpDir(), "d".repeat(60));
            const { calls } = runWithFakeSsh(sshCommand(target, ["true"]), false, long);
            expect(option(calls[0], "ControlPath")).toEqual(["none"]);
            expect(fs.existsSync(long)).toBe(false);
        });

        test("another process (a later pulumi operation) never joins an earlier one's master", () => {
            const once = runWithFakeSsh(sshCommand(target, ["true"]));
            const later = runWithFakeSsh(sshCommand(target, ["true"]), true);
            const [a] = option(once.calls[0], "ControlPath");
            const [b] = option(later.calls[0], "ControlPath");
            expect(path.basename(a)).toBe(`${process.pid}-%C`);
            expect(path.basename(b)).toMatch(/^\d+-%C$/);
            expect(path.basename(b)).not.toBe(path.basename(a));
        });
    });

    test("dashboard hint tunnels to loopback", () => {
        expect(dashboardTunnelHint(target, 8265)).toBe("ssh -L 8265:127.0.0.1:8265 aurora@10.1.230.180");
        expect(dashboardTunnelHint({ ...target, port: 2222 }, 8265)).toBe("ssh -L 8265:127.0.0.1:8265 -p 2222 aurora@10.1.230.180");
    });
});

describe("image distribution", () => {
    const dst: SshTarget = { ...target, host: "10.1.230.181" };

    test("host source streams save | load over ssh with ID checks and no temp file", () => {
        const s = imageEnsureScript({ kind: "host", node: "spark-1", target }, dst, "spark-2", "hellohal2064/vllm-qwen3.5-gb10");
        syntaxOk("bash", s);
        expect(s).toMatch(
            /ssh .* aurora@10\.1\.230\.180 'docker save hellohal2064\/vllm-qwen3\.5-gb10' \| ssh .* aurora@10\.1\.230\.181 'docker load'/,
        );
        // hosts compare images by their facts (sameImage), not by IDs, which differ across image stores
        expect(s).toContain(`if ! same "$have" "$want"; then`);
        expect(s).toContain(`same "$have" "$want" || fail "holds $have after docker load, not the source's image $want"`);
        expect(s).toContain("EXPECTED_IMAGE");
        // Docker 28's containerd store: a load that exits 0 without unpacking is a failure, its image removed
        expect(s).toContain(`case "$loaded" in *"Error unpacking image"*)`);
        expect(s).not.toMatch(/mktemp|\/tmp\/|\.tar/);
        expect(s).toContain("set -euo pipefail");
        expect(s).toMatchSnapshot();
    });

    test("local and registry sources", () => {
        const local = imageEnsureScript({ kind: "local" }, dst, "spark-2", "img:1");
        syntaxOk("bash", local);
        expect(local).toMatch(/docker save img:1 \| ssh .* 'docker load'/);
        const reg = imageEnsureScript({ kind: "registry" }, dst, "spark-2", "img:1");
        syntaxOk("bash", reg);
        expect(reg).toContain("'docker pull img:1'");
        expect(reg).not.toContain("docker save");
    });

    test("inspect prints the image's facts, or nothing for a missing image", () => {
        const s = imageInspectScript(dst, "img:1");
        syntaxOk("bash", s);
        expect(s).toContain("No such image");
        // an image on the containerd store without its layers' content has no RootFS.Layers: null, not an error
        expect(s).toContain(`{{.Id}} {{with index . "RootFS"}}{{json (index . "Layers")}}{{else}}null{{end}} {{.Architecture}}/{{.Os}}`);
        expect(s).toContain("io.containerd.snapshotter");
        expect(s).toMatchSnapshot();
    });
});

describe("ray containers", () => {
    const nodePorts = {
        nodeManagerPort: 6380,
        objectManagerPort: 6381,
        runtimeEnvAgentPort: 6382,
        dashboardAgentGrpcPort: 6383,
        metricsExportPort: 6384,
        dashboardAgentPort: 52365,
        minWorkerPort: 10002,
        maxWorkerPort: 19999,
    };
    const ports = {
        gcsPort: 6379,
        dashboardPort: 8265,
        clientPort: 10001,
        autoscalerMetricsPort: 44217,
        dashboardMetricsPort: 44227,
        ...nodePorts,
    };
    /** Every port a Ray node opens, pinned: nothing is left to Ray's random choice. */
    const pinned = [
        "--node-manager-port=6380",
        "--object-manager-port=6381",
        "--runtime-env-agent-port=6382",
        "--dashboard-agent-grpc-port=6383",
        "--dashboard-agent-listen-port=52365",
        "--metrics-export-port=6384",
        "--min-worker-port=10002",
        "--max-worker-port=19999",
    ];

    test("head binds the fabric IP, declares GPUs, dashboard on loopback, blocks", () => {
        const cmd = rayHeadCommand({ node: spark1, ports });
        expect(cmd).toEqual([
            "ray",
            "start",
            "--head",
            "--block",
            "--node-ip-address=192.168.200.12",
            "--port=6379",
            "--num-gpus=1",
            "--dashboard-host=127.0.0.1",
            "--dashboard-port=8265",
            "--ray-client-server-port=10001",
            ...pinned,
            "--disable-usage-stats",
        ]);
    });

    test("worker joins the head address with its own fabric IP", () => {
        expect(
            rayWorkerCommand({ node: sim, headAddress: "10.232.0.11:6379", ports: nodePorts, objectStoreMemoryBytes: 100000000 }),
        ).toEqual([
            "ray",
            "start",
            "--block",
            "--address=10.232.0.11:6379",
            "--node-ip-address=10.232.0.12",
            "--num-gpus=1",
            ...pinned,
            "--disable-usage-stats",
            "--object-store-memory=100000000",
        ]);
    });

    test("env pins vLLM, NCCL and GLOO to the fabric", () => {
        expect(nodeEnv(spark1)).toEqual([
            "VLLM_HOST_IP=192.168.200.12",
            "NCCL_SOCKET_IFNAME=enp1s0f1np1",
            "GLOO_SOCKET_IFNAME=enp1s0f1np1",
            "NCCL_IB_HCA=rocep1s0f1,roceP2p1s0f1",
            "RAY_memory_monitor_refresh_ms=0",
            ...CACHE_ENV,
        ]);
        expect(nodeEnv(sim)).toEqual([
            "VLLM_HOST_IP=10.232.0.12",
            "NCCL_SOCKET_IFNAME=fabric0",
            "GLOO_SOCKET_IFNAME=fabric0",
            "NCCL_IB_DISABLE=1",
            ...CACHE_ENV,
        ]);
        // a node's own env comes last, sorted by name
        expect(nodeEnv({ ...sim, env: { VLLM_CPU_OMP_THREADS_BIND: "1", NCCL_DEBUG: "INFO" } }).slice(8)).toEqual([
            "NCCL_DEBUG=INFO",
            "VLLM_CPU_OMP_THREADS_BIND=1",
        ]);
    });

    test("compile caches go to the node's cache directory, unless the node's env puts one elsewhere", () => {
        const own = nodeEnv({ ...sim, env: { TORCHINDUCTOR_CACHE_DIR: "/scratch/inductor" } });
        expect(own.filter((e) => e.startsWith("TORCHINDUCTOR_CACHE_DIR="))).toEqual(["TORCHINDUCTOR_CACHE_DIR=/scratch/inductor"]);
        expect(own).toContain("VLLM_CACHE_ROOT=/var/cache/vllm-cluster/vllm");
    });

    test("labels follow the contract", () => {
        expect(
            containerLabels(
                {
                    stack: "spark",
                    role: "ray-head",
                    node: spark1,
                    imageRef: "img",
                    ports: { gcs: 6379, dashboard: 8265, client: 10001 },
                },
                { "dashboard-host": "127.0.0.1" },
            ),
        ).toEqual({
            "vllm-cluster.managed": "true",
            "vllm-cluster.stack": "spark",
            "vllm-cluster.role": "ray-head",
            "vllm-cluster.node": "spark-1",
            "vllm-cluster.gpus": "1",
            "vllm-cluster.gpu-runtime": "nvidia",
            "vllm-cluster.unified-memory": "true",
            "vllm-cluster.ssh-port": "22",
            "vllm-cluster.ports": '{"gcs":6379,"dashboard":8265,"client":10001}',
            "vllm-cluster.image-ref": "img",
            "vllm-cluster.dashboard-host": "127.0.0.1",
        });
    });

    test("shm sizes convert to MB", () => {
        expect(shmSizeMb("64g")).toBe(65536);
        expect(shmSizeMb("256m")).toBe(256);
        expect(shmSizeMb(undefined)).toBeUndefined();
    });
});

describe("cluster readiness probe", () => {
    const spec = {
        address: "10.232.0.11:6379",
        nodes: [
            { name: "spark-1", fabricIp: "10.232.0.11", sshHost: "10.231.0.11" },
            { name: "spark-2", fabricIp: "10.232.0.12", sshHost: "10.231.0.12" },
        ],
        gpus: 2,
        timeoutSeconds: 0,
    };

    test("is infra/scripts/ray_cluster_probe.py in the head container, its spec one JSON argument", () => {
        const step = clusterReadyStep(spec);
        expect(step).toMatchObject({ script: "ray_cluster_probe.py", container: "vllm-ray-head" });
        expect(step.args.map((a) => JSON.parse(a) as unknown)).toEqual([spec]);
        expect(clusterReadyCommand(target, spec)).toContain("exec docker exec vllm-ray-head python3 -c");
        syntaxOk("sh", clusterReadyCommand(target, spec));
        expect(clusterReadyCommand(target, spec)).toMatchSnapshot();
    });

    /** Runs the probe with a fake `ray` module whose nodes() returns `nodes`. */
    function probe(nodes: object[]): { status: number | null; stdout: string; stderr: string } {
        const dir = fs.mkdtempSync(path.join(os.tmpdir(), "probe-"));
        fs.writeFileSync(
            path.join(dir, "ray.py"),
            `import json\ndef init(**kw): pass\ndef nodes(): return json.loads(${JSON.stringify(JSON.stringify(nodes))})\n`,
        );
        const r = spawnSync("python3", localStepArgv(clusterReadyStep(spec)).slice(1), {
            encoding: "utf8",
            env: { ...process.env, PYTHONPATH: dir },
        });
        fs.rmSync(dir, { recursive: true });
        return { status: r.status, stdout: r.stdout, stderr: r.stderr };
    }
    const node = (ip: string, id: string) => ({
        Alive: true,
        NodeManagerAddress: ip,
        NodeID: id,
        Resources: { GPU: 1, CPU: 4 },
    });

    test("ready: prints a fingerprint of the Ray node IDs", () => {
        const r = probe([node("10.232.0.11", "a"), node("10.232.0.12", "b")]);
        expect(r.status).toBe(0);
        const out = JSON.parse(r.stdout);
        expect(out.nodes).toEqual({ "spark-1": "10.232.0.11", "spark-2": "10.232.0.12" });
        expect(out.gpus).toBe(2);
        const again = JSON.parse(probe([node("10.232.0.11", "a"), node("10.232.0.12", "c")]).stdout);
        expect(again.fingerprint).not.toBe(out.fingerprint);
    });

    test("timeout names missing hosts and hosts registered with the management IP", () => {
        const r = probe([node("10.232.0.11", "a"), node("10.231.0.12", "b")]);
        expect(r.status).toBe(1);
        expect(r.stderr).toContain("missing hosts: spark-2 (fabric IP 10.232.0.12)");
        expect(r.stderr).toContain("hosts registered with a wrong IP: spark-2 registered as 10.231.0.12 instead of its fabric IP");
    });

    test("timeout names a GPU shortfall", () => {
        const r = probe([node("10.232.0.11", "a"), { ...node("10.232.0.12", "b"), Resources: {} }]);
        expect(r.status).toBe(1);
        expect(r.stderr).toContain("Ray sees 1 GPUs, expected 2");
    });
});

describe("vllm serve", () => {
    const model = {
        hostPath: "/home/aurora/models/Qwen3.5-122B-A10B-FP8",
        containerPath: "/models/Qwen3.5-122B-A10B-FP8",
        servedName: "qwen3.5-122b-a10b-fp8",
    };
    const spec: ServeConfig = {
        host: "0.0.0.0",
        port: 8001,
        tensorParallelSize: 2,
        pipelineParallelSize: 1,
        gpuMemoryUtilization: 0.9,
        maxModelLen: 32768,
        reasoningParser: "qwen3",
        toolCallParser: "qwen3_coder",
        enableAutoToolChoice: true,
        trustRemoteCode: true,
        extraArgs: ["--enforce-eager"],
        readyTimeoutSeconds: 1800,
        maxRestarts: 3,
        watchdog: { enabled: true, intervalSeconds: 30, timeoutSeconds: 30, failures: 3 },
    };

    test("command: each flag and value its own element, ray backend", () => {
        expect(serveCommand(spec, model)).toMatchSnapshot();
        const cmd = serveCommand(spec, model);
        expect(cmd.slice(0, 3)).toEqual(["vllm", "serve", "/models/Qwen3.5-122B-A10B-FP8"]);
        const flag = (f: string) => cmd[cmd.indexOf(f) + 1];
        expect(flag("--distributed-executor-backend")).toBe("ray");
        expect(flag("--tensor-parallel-size")).toBe("2");
        expect(flag("--port")).toBe("8001");
        expect(cmd[cmd.length - 1]).toBe("--enforce-eager");
    });

    test("native backend: vLLM's multi-node flags, rank 0 serves, ranks > 0 headless; no Ray", () => {
        const rank = { nnodes: 2, masterAddr: "192.168.200.12", masterPort: 29500 };
        const r0 = nativeServeCommand(spec, model, { ...rank, nodeRank: 0 });
        const r1 = nativeServeCommand(spec, model, { ...rank, nodeRank: 1 });
        expect(r1).toMatchSnapshot();
        const flag = (cmd: string[], f: string) => cmd[cmd.indexOf(f) + 1];
        for (const [cmd, nodeRank] of [
            [r0, "0"],
            [r1, "1"],
        ] as const) {
            expect(cmd.slice(0, 3)).toEqual(["vllm", "serve", "/models/Qwen3.5-122B-A10B-FP8"]);
            expect(flag(cmd, "--distributed-executor-backend")).toBe("mp");
            expect(flag(cmd, "--nnodes")).toBe("2");
            expect(flag(cmd, "--node-rank")).toBe(nodeRank);
            expect(flag(cmd, "--master-addr")).toBe("192.168.200.12");
            expect(flag(cmd, "--master-port")).toBe("29500");
            // TP x PP span all nodes, as with Ray: the same parallelism on every rank
            expect(flag(cmd, "--tensor-parallel-size")).toBe("2");
            expect(flag(cmd, "--pipeline-parallel-size")).toBe("1");
            expect(cmd).not.toContain("ray");
            expect(cmd[cmd.length - 1]).toBe("--enforce-eager");
        }
        expect(r0).not.toContain("--headless");
        expect(r1).toContain("--headless");
        // the ray command is unchanged apart from the distributed flags
        const strip = (cmd: string[]) => cmd.filter((_, i) => i < 11 || i >= cmd.indexOf("--gpu-memory-utilization"));
        expect(strip(r0)).toEqual(strip(serveCommand(spec, model)));
    });

    test("join fingerprint changes exactly when a rank's container ID changes", () => {
        const fp = joinFingerprint(["a", "b"]);
        expect(fp).toMatch(/^[0-9a-f]{16}$/);
        expect(joinFingerprint(["a", "b"])).toBe(fp);
        expect(joinFingerprint(["a", "c"])).not.toBe(fp);
        expect(joinFingerprint(["b", "a"])).not.toBe(fp);
    });

    /** The real entrypoint argv with the key file and guard directory moved under `dir`, then `cmd` as the Cmd. */
    function entrypoint(dir: string, keyFile: string, cmd: string[]): string[] {
        const argv = SERVE_ENTRYPOINT.map((a) =>
            a.startsWith("key-file=") ? `key-file=${keyFile}` : a.startsWith("guard-dir=") ? `guard-dir=${dir}/guard.XXXXXX` : a,
        );
        expect(argv).not.toEqual(SERVE_ENTRYPOINT);
        return [...argv, ...cmd];
    }

    test("entrypoint: infra/scripts/serve_entrypoint.sh shipped by content; the guard too, in a fresh private directory", () => {
        const [sh, c, boot, name, script, ...args] = SERVE_ENTRYPOINT;
        expect([sh, c, name]).toEqual(["/bin/sh", "-c", "serve_entrypoint"]);
        expect(boot).not.toContain("VLLM_API_KEY");
        expect(Buffer.from(script, "base64").toString()).toBe(scriptFile("serve_entrypoint.sh").text);
        expect(args).toEqual([
            "key-file=/run/vllm-cluster/api-key",
            "guard-dir=/run/vllm-cluster-guard.XXXXXX",
            `guard=${Buffer.from(GUARD_PY).toString("base64")}`,
            "--",
        ]);
        expect(scriptFile("serve_entrypoint.sh").text).toContain(`exit ${NO_API_KEY_EXIT}`);
        // the entrypoint really passes the command through; the key stays in the file, whose path the guard gets
        const dir = fs.mkdtempSync(path.join(os.tmpdir(), "ep-"));
        fs.writeFileSync(path.join(dir, "k"), "s3cret");
        const probe = 'printf "%s|%s|%s|%s|%s" "$(env | grep -c s3cret)" "$0" "$*" "$PYTHONPATH" "$VLLM_CLUSTER_API_KEY_FILE"';
        const [cmd, ...rest] = entrypoint(dir, path.join(dir, "k"), ["sh", "-c", probe, "zero"]);
        const r = spawnSync(cmd, rest, { encoding: "utf8", env: { PATH: process.env.PATH } });
        expect(r.stderr).toBe("");
        const [inEnv, zero, passed, pythonPath, keyPath] = r.stdout.split("|");
        expect([inEnv, zero, passed, keyPath]).toEqual(["0", "zero", "--middleware vllm_cluster_guard.RequireKey", path.join(dir, "k")]);
        // a directory of its own, made by mktemp (0700), not a fixed path someone else could make first
        expect(pythonPath).toMatch(new RegExp(`^${dir}/guard\\.[A-Za-z0-9]{6}$`));
        expect(fs.statSync(pythonPath).mode & 0o777).toBe(0o700);
        expect(fs.readFileSync(path.join(pythonPath, "vllm_cluster_guard.py"), "utf8")).toBe(GUARD_PY);
        fs.rmSync(dir, { recursive: true });
    });

    test.each([
        ["missing", (_f: string) => undefined],
        ["a directory (what a bind mount of a missing file leaves)", (f: string) => fs.mkdirSync(f)],
        ["empty", (f: string) => fs.writeFileSync(f, "")],
    ])("entrypoint fails closed when the key file is %s: the server command never runs", (_what, make) => {
        const dir = fs.mkdtempSync(path.join(os.tmpdir(), "ep-"));
        const keyFile = path.join(dir, "k");
        make(keyFile);
        const ran = path.join(dir, "ran");
        const [cmd, ...rest] = entrypoint(dir, keyFile, ["sh", "-c", `touch ${ran}`]);
        const r = spawnSync(cmd, rest, { encoding: "utf8" });
        expect(r.status).toBe(NO_API_KEY_EXIT);
        expect(r.stderr).toContain(`vllm-serve: no API key in ${keyFile}`);
        expect(r.stderr).toContain("refusing to serve without one");
        expect(fs.existsSync(ran)).toBe(false);
        fs.rmSync(dir, { recursive: true });
    });

    test("api key hash: stable, 16 hex digits, differs per key, does not contain the key", () => {
        const h = apiKeyHash("k3y-one");
        expect(h).toMatch(/^[0-9a-f]{16}$/);
        expect(apiKeyHash("k3y-one")).toBe(h);
        expect(apiKeyHash("k3y-two")).not.toBe(h);
    });

    test("api key install: stdin only, umask 077, atomic", () => {
        const step = secretInstallStep(apiKeyFile("/var/lib/vllm-cluster", "spark-1"));
        // the key is never an argument: only where it goes
        expect(step.args).toEqual([
            "install",
            "kind=api key",
            "node=spark-1",
            "dir=/var/lib/vllm-cluster/spark-1",
            "file=/var/lib/vllm-cluster/spark-1/api-key",
        ]);
        const text = scriptFile(step.script).text;
        expect(text).toContain("umask 077");
        expect(text).toContain(`cat >"$tmp"`);
        const dir = fs.mkdtempSync(path.join(os.tmpdir(), "key-"));
        const r = spawnSync("sh", apiKeyInstall(dir, "n1").slice(1), { input: "k3y", encoding: "utf8" });
        expect(r.status).toBe(0);
        expect(fs.readFileSync(path.join(dir, "n1", "api-key"), "utf8")).toBe("k3y");
        expect(fs.statSync(path.join(dir, "n1", "api-key")).mode & 0o777).toBe(0o600);
        const empty = spawnSync("sh", apiKeyInstall(dir, "n2").slice(1), { input: "", encoding: "utf8" });
        expect(empty.status).toBe(1);
        // an empty directory in the key's place (left by a bind mount of a missing file) is replaced by the key
        fs.mkdirSync(path.join(dir, "n3", "api-key"), { recursive: true });
        const overDir = spawnSync("sh", apiKeyInstall(dir, "n3").slice(1), { input: "k3y", encoding: "utf8" });
        expect(overDir.status).toBe(0);
        expect(fs.readFileSync(path.join(dir, "n3", "api-key"), "utf8")).toBe("k3y");
        // a non-empty directory there is refused, naming it
        fs.mkdirSync(path.join(dir, "n4", "api-key", "x"), { recursive: true });
        const busy = spawnSync("sh", apiKeyInstall(dir, "n4").slice(1), { input: "k3y", encoding: "utf8" });
        expect(busy.status).toBe(1);
        expect(busy.stderr).toContain(`${path.join(dir, "n4", "api-key")} is a non-empty directory`);
        fs.rmSync(dir, { recursive: true });
    });

    test("readiness: a step of infra/scripts/serve_readiness.bash with the model, key file and bound as arguments", () => {
        const step = serveReadinessStep({
            node: "spark-1",
            port: 8001,
            servedName: "qwen3.5-122b-a10b-fp8",
            apiKeyFile: "/home/aurora/.local/state/vllm-cluster/spark-1/api-key",
            statusFile: "/home/aurora/.local/state/vllm-cluster/spark-1/init/vllm-serve.status",
            timeoutSeconds: 1800,
        });
        expect(step.script).toBe("serve_readiness.bash");
        expect(step.args).toContain("timeout=1800");
        expect(step.args).toContain("key-file=/home/aurora/.local/state/vllm-cluster/spark-1/api-key");
        expect(JSON.parse(step.args.find((a) => a.startsWith("body="))!.slice(5))).toMatchObject({ model: "qwen3.5-122b-a10b-fp8" });
        expect(step.args.join(" ")).not.toMatch(/Authorization/);
        // the key reaches curl through a config file on a process substitution, never a -H on a command line
        const text = scriptFile("serve_readiness.bash").text;
        expect(text).toContain("-K <(auth)");
        expect(text).not.toMatch(/-H ['"]?Authorization/);
        expect(step).toMatchSnapshot();
    });

    test("readiness against a fake server: succeeds, and fails when the container died", () => {
        const dir = fs.mkdtempSync(path.join(os.tmpdir(), "ready-"));
        const keyfile = path.join(dir, "api-key");
        fs.writeFileSync(keyfile, "the-key");
        const seen = path.join(dir, "curl-args");
        // fake curl: records argv, checks the config file carries the key, answers 200
        fs.writeFileSync(
            path.join(dir, "curl"),
            `#!/bin/bash\necho "$@" >> ${seen}\nkey=0; url=""\nwhile [ $# -gt 0 ]; do case "$1" in -K) grep -q 'Bearer the-key' "$2" || exit 7; key=1; shift;; -w) fmt="$2"; shift;; http*) url="$1";; esac; shift; done\n` +
                `case "$url" in */health) printf 200;; *) if [ $key = 1 ]; then printf '{"choices":[{"message":{"content":"ready"}}]}\\n200 0.412'; elif [ "\${OPEN:-0}" = 1 ]; then printf 200; else printf 401; fi;; esac\n`,
            { mode: 0o755 },
        );
        // fake docker inspect: the container's ID for -f {{.Id}}, its start for {{.State.StartedAt}}, its state otherwise
        fs.writeFileSync(
            path.join(dir, "docker"),
            `#!/bin/sh\ncase "$*" in *'{{.Id}}'*) echo "\${FAKE_ID:-c0ffee}" ;; *StartedAt*) echo "$FAKE_STARTED" ;; *) echo "\${FAKE_STATE:-running}" ;; esac\n`,
            { mode: 0o755 },
        );
        const statusFile = path.join(dir, "vllm-serve.status");
        const env = { ...process.env, PATH: `${dir}:${process.env.PATH}` };
        const spec = {
            node: "spark-1",
            port: 8001,
            servedName: "m",
            apiKeyFile: keyfile,
            statusFile,
            timeoutSeconds: 5,
            intervalSeconds: 0,
        };
        // the container started 30 s ago (docker's own timestamp form, nanoseconds and Z)
        const started = new Date(Date.now() - 30_000).toISOString().replace(/Z$/, "123456Z");
        const ok = spawnSync("bash", localStepArgv(serveReadinessStep(spec)).slice(1), {
            encoding: "utf8",
            env: { ...env, FAKE_STARTED: started },
        });
        expect(ok.stderr).toBe("");
        expect(ok.status).toBe(0);
        // the launch: from the container's start to the completion's answer, and that completion's own time (curl's)
        const line = JSON.parse(ok.stdout) as Record<string, unknown>;
        expect(line).toMatchObject({ ready: true, node: "spark-1", port: 8001, completionSeconds: 0.412, startedAt: started });
        expect(line.readySeconds).toBeGreaterThanOrEqual(29.9);
        expect(line.readySeconds).toBeLessThan(60);
        expect(launchTimings(ok.stdout, 31.5)).toEqual({
            readySeconds: line.readySeconds,
            firstCompletionSeconds: 0.412,
            waitedSeconds: 31.5,
            startedAt: started,
        });
        expect(fs.readFileSync(seen, "utf8")).not.toContain("the-key");

        // a look (refresh) reports no launch; a start that is not docker's timestamp form is left out, never echoed
        const look = spawnSync("bash", localStepArgv(serveReadinessStep({ ...spec, look: true })).slice(1), {
            encoding: "utf8",
            env: { ...env, FAKE_STARTED: started },
        });
        expect(JSON.parse(look.stdout)).toEqual({ ready: true, node: "spark-1", port: 8001, completionSeconds: 0.412 });
        const odd = spawnSync("bash", localStepArgv(serveReadinessStep(spec)).slice(1), {
            encoding: "utf8",
            env: { ...env, FAKE_STARTED: `${started}","readySeconds":0,"x":"` },
        });
        expect(odd.status).toBe(0);
        expect(JSON.parse(odd.stdout)).toEqual({ ready: true, node: "spark-1", port: 8001, completionSeconds: 0.412 });

        // the watchdog's last restart of this very container is named (a refresh shows it); another container's is
        // not, and the text the host's file holds reaches the line as a JSON string, whatever its bytes
        const dogFile = path.join(dir, "vllm-serve.watchdog");
        const lookLine = (id?: string) =>
            JSON.parse(
                spawnSync("bash", localStepArgv(serveReadinessStep({ ...spec, look: true })).slice(1), {
                    encoding: "utf8",
                    env: { ...env, ...(id ? { FAKE_ID: id } : {}) },
                }).stdout,
            ) as Record<string, unknown>;
        fs.writeFileSync(
            dogFile,
            'c0ffee 2026-12-07T12:00:05Z no completion within 30 s, 3 times: restarted (last: "x"\\ \x1b[2J)\nsecond line\n',
        );
        expect(lookLine().watchdog).toBe('2026-12-07T12:00:05Z no completion within 30 s, 3 times: restarted (last: "x"\\ [2J)');
        expect(lookLine("beef").watchdog).toBeUndefined();
        fs.rmSync(dogFile);
        fs.symlinkSync(statusFile, dogFile);
        fs.writeFileSync(statusFile, "c0ffee healthy\n");
        expect(lookLine().watchdog).toBeUndefined();
        fs.rmSync(dogFile);
        fs.rmSync(statusFile);

        // a server that answers without the key is open, not ready
        const open = spawnSync("bash", localStepArgv(serveReadinessStep(spec)).slice(1), { encoding: "utf8", env: { ...env, OPEN: "1" } });
        expect(open.status).toBe(1);
        expect(open.stderr).toContain(
            "vllm-serve on node spark-1: a chat completion without the API key returned HTTP 200, not 401: the server does not enforce its key",
        );

        fs.writeFileSync(path.join(dir, "curl"), `#!/bin/sh\nprintf 000\n`, { mode: 0o755 });
        const dead = spawnSync("bash", localStepArgv(serveReadinessStep(spec)).slice(1), {
            encoding: "utf8",
            env: { ...env, FAKE_STATE: "exited" },
        });
        expect(dead.status).toBe(1);
        expect(dead.stderr).toContain("vllm-serve on node spark-1: container is exited before /health answered");

        // the init's verdict for this container ends the wait at once, named; another container's is not this one's
        fs.writeFileSync(statusFile, "c0ffee OOM-killed under its memory ceiling of 256MiB\n");
        const t0 = Date.now();
        const oom = spawnSync("bash", localStepArgv(serveReadinessStep({ ...spec, timeoutSeconds: 60 })).slice(1), {
            encoding: "utf8",
            env: { ...env, FAKE_STATE: "restarting" },
        });
        expect(oom.status).toBe(1);
        expect(oom.stderr).toContain("vllm-serve on node spark-1: OOM-killed under its memory ceiling of 256MiB (container restarting)");
        expect(Date.now() - t0).toBeLessThan(30_000);
        const other = spawnSync("bash", localStepArgv(serveReadinessStep(spec)).slice(1), {
            encoding: "utf8",
            env: { ...env, FAKE_STATE: "restarting", FAKE_ID: "beef" },
        });
        expect(other.stderr).toContain("/health did not return 200 within 5s");
        fs.writeFileSync(statusFile, "c0ffee memory guard: stopped: MemAvailable 1.0 GiB is below the floor of 4.0 GiB\n");
        const guard = spawnSync("bash", localStepArgv(serveReadinessStep(spec)).slice(1), {
            encoding: "utf8",
            env: { ...env, FAKE_STATE: "exited" },
        });
        expect(guard.stderr).toContain("vllm-serve on node spark-1: memory guard: stopped: MemAvailable 1.0 GiB is below the floor");
        fs.rmSync(dir, { recursive: true });
    });
});

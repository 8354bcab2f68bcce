/** infra/scripts/preflight.sh, run as a file with the arguments its step gives it, against stand-in docker, ip and ss. */
import { SpawnSyncOptionsWithStringEncoding, spawn, spawnSync } from "child_process";
import * as fs from "fs";
import * as net from "net";
import * as os from "os";
import * as path from "path";
import type { NodeConfig } from "../../infra/config";
import { PortOwner, preflightCommand, preflightStep } from "../../infra/builders/preflight";
import { localStepArgv, scriptFile } from "../../infra/builders/remoteStep";
import { sim, spark1, target } from "./nodes";

/** Runs the preflight script as a file, with the arguments preflightStep gives it (as the host would). */
function runPreflight(
    n: NodeConfig,
    stateDir: string,
    ports: number[],
    opts: SpawnSyncOptionsWithStringEncoding,
    shell = "sh",
    modelDir?: string,
    owner?: PortOwner,
) {
    const [, ...args] = localStepArgv(preflightStep(n, stateDir, ports, [], modelDir, owner));
    return spawnSync(shell, args, opts);
}

describe("preflight", () => {
    test("a step of infra/scripts/preflight.sh: the node's facts as arguments, the port check only with ports", () => {
        const step = preflightStep(spark1, "/var/lib/vllm-cluster", [6379, 8000, 8265, 10001]);
        expect(step).toEqual({
            what: "preflight on node spark-1",
            script: "preflight.sh",
            args: [
                "node=spark-1",
                "login=aurora@10.1.230.180",
                "state-dir=/var/lib/vllm-cluster",
                "fabric-interface=enp1s0f1np1",
                "fabric-ip=192.168.200.12",
                "gpu-runtime=nvidia",
                "gpus=1",
                "ports=6379,8000,8265,10001",
                "managed-label=vllm-cluster.managed",
            ],
        });
        expect(preflightStep(sim, "/var/lib/vllm-cluster", []).args.some((a) => a.startsWith("ports="))).toBe(false);
        // the recorded command names the script by its hash and carries the arguments, never the script's text
        const cmd = preflightCommand(target, sim, "/var/lib/vllm-cluster", []);
        expect(cmd).toContain(`vcl_sha256=${scriptFile("preflight.sh").sha256}`);
        // one line per argument, so a diff shows exactly the one that changed
        expect(cmd).toContain('vcl_args="$vcl_args "node=spark-2\nvcl_args="$vcl_args "login=root@10.231.0.12\n');
        expect(cmd).not.toContain("docker version");
        expect(cmd).toMatchSnapshot();
    });

    test("unknown or missing arguments are refused", () => {
        const [sh, file] = localStepArgv(preflightStep(sim, "/x", []));
        const unknown = spawnSync(sh, [file, "nod=spark-2"], { encoding: "utf8" });
        expect(unknown.status).toBe(2);
        expect(unknown.stderr).toBe("preflight: unknown argument: nod=spark-2\n");
        const missing = spawnSync(sh, [file, "node=spark-2"], { encoding: "utf8" });
        expect(missing.status).toBe(2);
        expect(missing.stderr).toBe("preflight: missing argument login\n");
    });

    test("a state or model directory on a file system that a reboot empties (tmpfs) is refused, naming it", () => {
        const dir = fs.mkdtempSync(path.join(os.tmpdir(), "preflight-ram-"));
        fs.writeFileSync(path.join(dir, "docker"), "#!/bin/sh\necho 28.0.1\n", { mode: 0o755 });
        fs.writeFileSync(path.join(dir, "ip"), '#!/bin/sh\necho "3: fabric0    inet 10.232.0.12/24 scope global fabric0"\n', {
            mode: 0o755,
        });
        const env = { ...process.env, PATH: `${dir}:${process.env.PATH}` };
        // /dev/shm is a tmpfs on Linux; the test's own directory is not
        expect(spawnSync("stat", ["-f", "-c", "%T", "/dev/shm"], { encoding: "utf8" }).stdout.trim()).toBe("tmpfs");
        const ram = fs.mkdtempSync("/dev/shm/vcl-preflight-");
        try {
            const state = runPreflight(sim, ram, [], { encoding: "utf8", env });
            expect(state.status).toBe(1);
            expect(state.stderr).toContain(`state dir ${ram} is on tmpfs, which a reboot empties`);
            const model = runPreflight(sim, path.join(dir, "state"), [], { encoding: "utf8", env }, "sh", ram);
            expect(model.status).toBe(1);
            expect(model.stderr).toContain(`model directory ${ram} is on tmpfs, which a reboot empties; set model.hostPath`);
            // on disk, or not there yet (a model the chain will copy): passes
            expect(runPreflight(sim, path.join(dir, "state"), [], { encoding: "utf8", env }, "sh", dir).status).toBe(0);
            expect(runPreflight(sim, path.join(dir, "state"), [], { encoding: "utf8", env }, "sh", `${ram}/not-yet`).status).toBe(0);
        } finally {
            fs.rmSync(ram, { recursive: true, force: true });
            fs.rmSync(dir, { recursive: true, force: true });
        }
    });

    test("runs against fake docker/ip: reports facts, or fails naming the host", () => {
        const dir = fs.mkdtempSync(path.join(os.tmpdir(), "preflight-"));
        const write = (name: string, body: string) => {
            fs.writeFileSync(path.join(dir, name), `#!/bin/sh\n${body}\n`, { mode: 0o755 });
        };
        write("docker", `echo 28.0.1`);
        write("ip", `echo "3: fabric0    inet 10.232.0.12/24 brd 10.232.0.255 scope global fabric0"`);
        const env = { ...process.env, PATH: `${dir}:${process.env.PATH}` };
        const stateDir = path.join(dir, "state");
        const ok = runPreflight(sim, stateDir, [], { encoding: "utf8", env });
        expect(ok.status).toBe(0);
        expect(JSON.parse(ok.stdout)).toMatchObject({ node: "spark-2", dockerVersion: "28.0.1", gpusSeen: 1 });
        // the host's memory, for the default ceiling of a unified-memory node: this machine's MemTotal
        const memTotal = Number(/^MemTotal:\s+(\d+)/m.exec(fs.readFileSync("/proc/meminfo", "utf8"))![1]);
        expect(JSON.parse(ok.stdout).memTotalKib).toBe(memTotal);
        // private to the login user: no other local user can plant code in a container's /tmp, its compile caches or
        // the crash budgets and verdicts of its containers' inits
        for (const d of ["", "tmp", "cache", "init"]) {
            expect(fs.statSync(path.join(stateDir, "spark-2", d)).mode & 0o7777).toBe(0o700);
        }
        // a link planted in place of a directory is refused, never followed
        const cache = path.join(stateDir, "spark-2", "cache");
        const me = os.userInfo().username;
        fs.rmSync(cache, { recursive: true });
        fs.symlinkSync(os.tmpdir(), cache);
        const linked = runPreflight(sim, stateDir, [], { encoding: "utf8", env });
        expect(linked.status).toBe(1);
        expect(linked.stderr).toContain(`${cache} is not a directory owned by ${me}`);
        fs.rmSync(cache);
        if (process.getuid?.() === 0) {
            // a directory another user made (or a world-writable one from an earlier release) is refused too
            fs.mkdirSync(cache, { mode: 0o1777 });
            fs.chownSync(cache, 65534, 65534);
            const planted = runPreflight(sim, stateDir, [], { encoding: "utf8", env });
            expect(planted.status).toBe(1);
            expect(planted.stderr).toContain(`${cache} is not a directory owned by root (owner: nobody)`);
            fs.rmSync(cache, { recursive: true });
        }
        // a stateDir every user can write without the sticky bit would let any of them rename ours away
        fs.chmodSync(stateDir, 0o777);
        const open = runPreflight(sim, stateDir, [], { encoding: "utf8", env });
        expect(open.status).toBe(1);
        expect(open.stderr).toContain(`state dir ${stateDir} is writable by every user and not sticky`);
        fs.chmodSync(stateDir, 0o755);

        const wrongIp = runPreflight({ ...sim, fabricIp: "10.232.0.1" }, stateDir, [], {
            encoding: "utf8",
            env,
        });
        expect(wrongIp.status).toBe(1);
        expect(wrongIp.stderr).toContain(
            "preflight failed on node spark-2 (root@10.231.0.12): fabric IP 10.232.0.1 is not on interface fabric0 (has: 10.232.0.12/24",
        );

        write("docker", `echo "Cannot connect to the Docker daemon" >&2; exit 1`);
        const noDocker = runPreflight(sim, stateDir, [], { encoding: "utf8", env });
        expect(noDocker.status).toBe(1);
        expect(noDocker.stderr).toContain("preflight failed on node spark-2 (root@10.231.0.12): docker engine unreachable");

        write("docker", `echo 28.0.1`);
        write("nvidia-smi", `echo "GPU 0: NVIDIA GB10"`);
        const twoGpus = runPreflight({ ...sim, gpuRuntime: "nvidia", gpus: 2 }, stateDir, [], {
            encoding: "utf8",
            env,
        });
        expect(twoGpus.status).toBe(1);
        expect(twoGpus.stderr).toContain("expected 2 GPU(s), nvidia-smi -L lists 1");
        fs.rmSync(dir, { recursive: true });
    });

    test("ports: free ones pass; one held by another process fails naming node and port; ours are accepted; no ss warns", () => {
        const dir = fs.mkdtempSync(path.join(os.tmpdir(), "preflight-ports-"));
        const bin = path.join(dir, "bin");
        fs.mkdirSync(bin);
        const write = (name: string, body: string) => {
            fs.writeFileSync(path.join(bin, name), `#!/bin/sh\n${body}\n`, { mode: 0o755 });
        };
        // PATH is only this directory: the fakes plus the real tools the script needs (so `ss` can be missing)
        for (const tool of ["mkdir", "chmod", "grep", "awk", "tr", "uname", "cat", "find", "id", "stat"]) {
            const real = spawnSync("sh", ["-c", `command -v ${tool}`], { encoding: "utf8" }).stdout.trim();
            fs.symlinkSync(real, path.join(bin, tool));
        }
        const listeners = path.join(dir, "listeners");
        const running = path.join(dir, "running");
        const claims = path.join(dir, "claims");
        fs.writeFileSync(claims, "");
        // `ss -Hltn` prints the listeners file; `docker ps` the running-containers file, only for the project's label
        write("ss", `[ "$*" = "-Hltn" ] || exit 2\ncat ${listeners}`);
        write(
            "docker",
            [
                `case "$1" in`,
                `version) echo 28.0.1 ;;`,
                `ps) case "$*" in`,
                `    "ps --quiet --filter label=vllm-cluster.managed=true") cat ${running} ;;`,
                `    "ps --all --filter label=vllm-cluster.managed=true --format {{.Names}}|{{.Label \\"vllm-cluster.stack\\"}}|{{.Label \\"vllm-cluster.cluster\\"}}|{{.Label \\"vllm-cluster.ports\\"}}") cat ${claims} ;;`,
                `    *) exit 2 ;;`,
                `    esac ;;`,
                `*) exit 2 ;;`,
                `esac`,
            ].join("\n"),
        );
        write("ip", `echo "3: fabric0    inet 10.232.0.12/24 brd 10.232.0.255 scope global fabric0"`);
        const env = { PATH: bin, HOME: dir };
        const head = { ...sim, name: "spark-1", sshHost: "10.231.0.11" };
        const run = (ports: number[]) => runPreflight(head, path.join(dir, "state"), ports, { encoding: "utf8", env }, "/bin/sh");
        const ports = [6379, 8000, 8265, 10001];

        // free: other listeners only (sshd, a port that merely ends in 8000, a client port), none of ours
        fs.writeFileSync(
            listeners,
            [
                "LISTEN 0      128          0.0.0.0:22         0.0.0.0:*",
                "LISTEN 0      128          0.0.0.0:18000      0.0.0.0:*",
                "LISTEN 0      4096       127.0.0.1:80         0.0.0.0:*",
                "LISTEN 0      128             [::]:22            [::]:*",
            ].join("\n") + "\n",
        );
        fs.writeFileSync(running, "");
        const free = run(ports);
        expect(free.stderr).toBe("");
        expect(free.status).toBe(0);
        expect(JSON.parse(free.stdout)).toMatchObject({ node: "spark-1" });

        // taken: a stopped proxy still holds 8000 (IPv6 any address), no project container runs
        fs.appendFileSync(listeners, "LISTEN 0      511               *:8000             *:*\n");
        const taken = run(ports);
        expect(taken.status).toBe(1);
        expect(taken.stdout).toBe("");
        expect(taken.stderr.trim()).toBe(
            "preflight failed on node spark-1 (root@10.231.0.11): port 8000 is already in use on the host, not by this project " +
                "(see who holds it: ss -ltnp 'sport = :8000')",
        );
        // two taken ports: both named
        fs.appendFileSync(listeners, "LISTEN 0      511     10.232.0.11:6379       0.0.0.0:*\n");
        const two = run(ports);
        expect(two.status).toBe(1);
        expect(two.stderr).toContain(
            "port 6379 is already in use on the host, not by this project (see who holds it: ss -ltnp 'sport = :6379')",
        );
        expect(two.stderr).toContain("port 8000 is already in use");

        // a re-run against the deployed cluster: a project container runs, so the listeners are ours
        fs.writeFileSync(running, "3f2a9c1d0b7e\n");
        const ours = run(ports);
        expect(ours.stderr).toBe("");
        expect(ours.status).toBe(0);

        // a node whose containers listen on nothing is not checked
        fs.writeFileSync(running, "");
        expect(run([]).status).toBe(0);

        // another stack's or cluster's containers on the host: a port one of them claims (by its ports label, running
        // or not) is refused, naming the container, its stack and cluster; this cluster's own are not
        fs.writeFileSync(listeners, "");
        const owned = (owner: PortOwner) =>
            runPreflight(head, path.join(dir, "state"), ports, { encoding: "utf8", env }, "/bin/sh", undefined, owner);
        fs.writeFileSync(
            claims,
            [
                'vllm-serve|local||{"api":8000}',
                'vllm-ray-head|local||{"gcs":6379,"dashboard":8265,"client":10001}',
                'second-serve|local|second|{"api":8100}',
            ].join("\n") + "\n",
        );
        expect(owned({ stack: "local", cluster: "vllm" })).toMatchObject({ stderr: "", status: 0 });
        const otherStack = owned({ stack: "staging", cluster: "vllm" });
        expect(otherStack.status).toBe(1);
        expect(otherStack.stderr).toContain(
            "port 8000 is claimed on this host by container vllm-serve of stack local: two clusters on one host need distinct " +
                "ports (serve.port, ray.*, native.masterPort)",
        );
        for (const p of [6379, 8265, 10001])
            expect(otherStack.stderr).toContain(`port ${p} is claimed on this host by container vllm-ray-head`);
        // the second cluster of the same stack claims 8100, which the first does not use: the first passes
        expect(owned({ stack: "local", cluster: "vllm" }).stderr).toBe("");
        const clash = owned({ stack: "local", cluster: "third" });
        expect(clash.stderr).toContain("port 8000 is claimed on this host by container vllm-serve of stack local:");
        fs.writeFileSync(claims, 'x\x1b[2J|evil\x07|c|{"api":8000}\n');
        const hostile = owned({ stack: "local", cluster: "vllm" });
        expect(hostile.stderr).toContain("port 8000 is claimed on this host by container x[2J of stack evil, cluster c:");
        expect(hostile.stderr).not.toMatch(/[\x00-\x08\x0b-\x1f\x7f]/);
        fs.writeFileSync(claims, "");

        // no ss on the host: one warning line, and the check is skipped
        fs.rmSync(path.join(bin, "ss"));
        const noSs = run(ports);
        expect(noSs.status).toBe(0);
        expect(noSs.stderr).toBe(
            "preflight warning on node spark-1: ss (iproute2) not found; not checking that ports 6379 8000 8265 10001 are free\n",
        );
        expect(JSON.parse(noSs.stdout)).toMatchObject({ node: "spark-1", gpusSeen: 1 });
        fs.rmSync(dir, { recursive: true });
    });

    test("ssh peers: an sshd answering at each peer's address passes; none, or something else, fails naming both nodes", async () => {
        // two real listeners on loopback, in a child process: one speaks SSH's banner, one HTTP
        const server = spawn("python3", ["-c", PEER_SERVER], { stdio: ["ignore", "pipe", "inherit"] });
        try {
            const [sshPort, httpPort] = await new Promise<number[]>((resolve, reject) => {
                server.stdout.once("data", (b: Buffer) => resolve(b.toString().trim().split(" ").map(Number)));
                server.once("exit", (c) => reject(new Error(`peer server exited (${c})`)));
            });
            const dir = fs.mkdtempSync(path.join(os.tmpdir(), "preflight-peers-"));
            fs.writeFileSync(path.join(dir, "docker"), "#!/bin/sh\necho 28.0.1\n", { mode: 0o755 });
            fs.writeFileSync(path.join(dir, "ip"), `#!/bin/sh\necho "3: fabric0    inet 10.232.0.12/24 scope global fabric0"\n`, {
                mode: 0o755,
            });
            const env = { ...process.env, PATH: `${dir}:${process.env.PATH}` };
            const peer = (port: number, node = "spark-1") => ({ node, host: "127.0.0.1", port, network: "fabric" as const });
            const run = (peers: ReturnType<typeof peer>[]) => {
                const [sh, ...args] = localStepArgv(preflightStep(sim, path.join(dir, "state"), [], peers));
                return spawnSync(sh, args, { encoding: "utf8", env });
            };
            const ok = run([peer(sshPort)]);
            expect([ok.status, ok.stderr]).toEqual([0, ""]);
            const closed = await freePort();
            const none = run([peer(sshPort), peer(closed, "spark-3")]);
            expect(none.status).toBe(1);
            expect(none.stderr.trim()).toBe(
                `preflight failed on node spark-2 (root@10.231.0.12): cannot reach node spark-3's sshd at 127.0.0.1:${closed} on the ` +
                    "fabric network (distribution.network=fabric: chain copies go from node spark-2 to node spark-3 there); check the " +
                    "link and that sshd listens on 127.0.0.1, or set distribution.network",
            );
            const http = run([peer(httpPort)]);
            expect(http.status).toBe(1);
            expect(http.stderr).toContain(`cannot reach node spark-1's sshd at 127.0.0.1:${httpPort} on the fabric network`);
            fs.rmSync(dir, { recursive: true });
        } finally {
            server.kill();
        }
    });
});

/** Two loopback listeners: the first answers with an SSH banner, the second with an HTTP status line. Prints both ports. */
const PEER_SERVER = `
import select, socket
socks = []
for banner in (b"SSH-2.0-OpenSSH_9.2p1\\r\\n", b"HTTP/1.1 400 Bad Request\\r\\n"):
    s = socket.socket(); s.bind(("127.0.0.1", 0)); s.listen(8); socks.append((s, banner))
print(" ".join(str(s.getsockname()[1]) for s, _ in socks), flush=True)
while True:
    for r in select.select([s for s, _ in socks], [], [], 60)[0]:
        c, _ = r.accept(); c.sendall(dict(socks)[r]); c.close()
`;

/** A loopback port nothing listens on (bound, then released). */
function freePort(): Promise<number> {
    return new Promise((resolve) => {
        const srv = net.createServer().listen(0, "127.0.0.1", () => {
            const port = (srv.address() as net.AddressInfo).port;
            srv.close(() => resolve(port));
        });
    });
}

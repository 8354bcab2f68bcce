/**
 * infra/scripts/status_probe.bash run as a file with the arguments its step gives it (infra/builders/status.ts),
 * against stand-in docker and curl: what it prints for a head and a worker, that it only reads (docker ps, inspect
 * and the Ray probe's exec; nothing written), and that whatever bytes a host's files hold it prints valid JSON.
 */
import { spawnSync } from "child_process";
import * as fs from "fs";
import * as path from "path";
import { statusProbeCommand, statusProbeStep, statusRayAddress } from "../../infra/builders/status";
import { localStepArgv, scriptFile } from "../../infra/builders/remoteStep";
import { FIXTURES, NODES, RAY_MEMBERS, StandIn, cid, inspectLine, standInHost, statusSpec, tempState } from "./statusHosts";

const METRICS = fs.readFileSync(path.join(FIXTURES, "metrics-1.txt"), "utf8");
const RAY_OK = RAY_MEMBERS;

let state: string;
beforeEach(() => (state = tempState("vcl-status-probe-")));
afterEach(() => fs.rmSync(state, { recursive: true, force: true }));

/** Runs the probe of `node` as its step would, the host's stand-ins first on PATH. */
function probe(node: number, host: StandIn, spec = statusSpec(state)) {
    const [sh, ...args] = localStepArgv(statusProbeStep(spec, NODES[node]));
    const r = spawnSync(sh, args, { encoding: "utf8", env: { ...process.env, PATH: `${host.bin}:${process.env.PATH}`, TMPDIR: host.dir } });
    return { ...r, json: () => JSON.parse(r.stdout) };
}

/** Every file under `dir` with its content and modification time: what "changes nothing" compares. */
function tree(dir: string): string[] {
    return fs.readdirSync(dir, { recursive: true, encoding: "utf8" }).map((f) => {
        const p = path.join(dir, f);
        const st = fs.lstatSync(p);
        return `${f} ${st.mtimeMs} ${st.isFile() ? fs.readFileSync(p, "base64") : st.isSymbolicLink() ? fs.readlinkSync(p) : ""}`;
    });
}

function headHost(over: Partial<Parameters<typeof standInHost>[2]> = {}): StandIn {
    return standInHost(state, "spark-1", {
        ps: [cid("a"), cid("b")],
        inspect: [
            inspectLine({ id: cid("a"), name: "vllm-ray-head", role: "ray-head", maxStarts: 4 }),
            inspectLine({ id: cid("b"), name: "vllm-serve", role: "serve", maxStarts: 4, restarts: 1 }),
        ],
        ray: RAY_OK,
        metrics: METRICS,
        ...over,
    });
}

describe("status probe", () => {
    test("the head's step: the stack's label, the init directory, /metrics on loopback and Ray's view looking once", () => {
        const spec = statusSpec("/var/lib/vllm-cluster");
        const step = statusProbeStep(spec, NODES[0]);
        expect(step.script).toBe("status_probe.bash");
        expect(step.args).toEqual(
            expect.arrayContaining([
                "node=spark-1",
                "init-dir=/var/lib/vllm-cluster/spark-1/init",
                "stack-label=vllm-cluster.stack",
                "stack=test",
                "metrics-port=8000",
                "tls=yes",
                "ray-container=vllm-ray-head",
                "ray-address=10.232.0.11:6379",
            ]),
        );
        expect(statusRayAddress(spec)).toBe("10.232.0.11:6379");
        // the Ray probe travels by content, as an argument of this one
        expect(step.args).toContain(`ray-probe=${Buffer.from(scriptFile("ray_members.py").text).toString("base64")}`);
        // a worker asks neither vLLM nor Ray; a native head asks vLLM only
        const worker = statusProbeStep(spec, NODES[1]).args;
        expect(worker.filter((a) => /^(metrics-port|tls|ray-)/.test(a))).toEqual([]);
        const native = statusProbeStep({ ...spec, backend: "native" }, NODES[0]).args;
        expect(native.filter((a) => a.startsWith("ray-"))).toEqual([]);
        expect(native).toContain("metrics-port=8000");
        // ssh with the stack's own key and known_hosts, host keys checked, as a session of one shared connection
        const cmd = statusProbeCommand(spec, NODES[1]);
        expect(cmd).toContain(`vcl_sha256=${scriptFile("status_probe.bash").sha256}`);
        expect(cmd).toContain("-i /home/op/.ssh/id_ed25519 -o IdentitiesOnly=yes -o UserKnownHostsFile=/home/op/.ssh/known_hosts");
        expect(cmd).toContain("-o StrictHostKeyChecking=yes");
        expect(cmd).toContain("-o ControlMaster=auto");
        expect(() => statusProbeStep({ ...spec, nodes: [NODES[1]] }, NODES[1])).toThrow(
            "the status output names no head (nodes: spark-2 worker)",
        );
    });

    test("the head: its containers with their init files, memory, disk, vLLM's lines only and Ray's answer; nothing written", () => {
        const host = headHost();
        fs.writeFileSync(path.join(host.init, "vllm-serve.starts"), `${cid("b")} 2\n`);
        fs.writeFileSync(path.join(host.init, "vllm-serve.status"), `${cid("b")} start 2 of at most 4\n`);
        fs.writeFileSync(path.join(host.init, "vllm-ray-head.status"), `${cid("a")} healthy\n`);
        const before = tree(state);
        const memTotal = () => Number(/^MemTotal:\s+(\d+)/m.exec(fs.readFileSync("/proc/meminfo", "utf8"))![1]);
        // MemTotal may move while the probe runs (a balloon driver in a VM): it is the one read before or after
        const totals = [memTotal()];
        const r = probe(0, host);
        totals.push(memTotal());
        expect(r.stderr).toBe("");
        expect(r.status).toBe(0);
        const j = r.json();
        expect(j).toMatchObject({ probe: "status", node: "spark-1", docker: { ok: true }, ray: { ok: true, text: RAY_OK.trim() } });
        expect(j.containers.map((c: { name: string }) => c.name)).toEqual(["/vllm-ray-head", "/vllm-serve"]);
        expect(j.containers[1]).toMatchObject({
            initStarts: `${cid("b")} 2`,
            initStatus: `${cid("b")} start 2 of at most 4`,
            initArgs: ["max-starts=4", null],
            restartCount: 1,
        });
        expect(j.containers[0]).toMatchObject({ initStarts: null, initStatus: `${cid("a")} healthy` });
        expect(totals).toContain(j.memory.totalKib);
        expect(j.memory.availableKib).toBeGreaterThan(0);
        // the model is not there yet: free space where it would land
        expect(j.disk.path).toBe(path.join(state, "models"));
        expect(j.disk.freeBytes).toBeGreaterThan(0);
        const lines: string[] = j.metrics.text.split("\n");
        expect(lines.length).toBeGreaterThan(50);
        expect(lines.every((l) => l.startsWith("vllm:") && !/_created[{ ]/.test(l))).toBe(true);
        expect(lines).toContain('vllm:num_requests_running{engine="0",model_name="qwen3.5-122b-a10b-fp8"} 8.0');
        // read-only: only docker ps and inspect, the Ray probe in the head container, and /metrics over loopback
        const calls = host.calls();
        expect([...new Set(calls.map((c) => c.split(" ").slice(0, 2).join(" ")))].sort()).toEqual([
            "curl --insecure",
            "docker exec",
            "docker inspect",
            "docker ps",
        ]);
        expect(calls.find((c) => c.startsWith("docker ps"))).toContain("--filter label=vllm-cluster.stack=test");
        expect(calls.find((c) => c.startsWith("docker inspect"))).toContain(`${cid("a")} ${cid("b")}`);
        expect(calls.find((c) => c.startsWith("docker exec"))).toMatch(/^docker exec vllm-ray-head python3 -c /);
        expect(calls.find((c) => c.startsWith("curl"))).toMatch(/ https:\/\/127\.0\.0\.1:8000\/metrics$/);
        // nothing on the host changed, and nothing was left in its temporary directory
        expect(tree(state).filter((f) => !f.startsWith(".standin"))).toEqual(before.filter((f) => !f.startsWith(".standin")));
        expect(fs.readdirSync(host.dir).sort()).toEqual(["bin", "calls", "inspect", "metrics", "ps", "ray"]);
    });

    test("only this cluster's containers: the stack program's have no cluster label; another cluster's carry its name", () => {
        const host = standInHost(state, "spark-2", {
            ps: [cid("c"), cid("d")],
            inspect: [
                inspectLine({ id: cid("c"), name: "vllm-ray-worker", role: "ray-worker", maxStarts: 4 }),
                inspectLine({ id: cid("d"), name: "blue-ray-worker", cluster: "blue", role: "ray-worker", maxStarts: 4 }),
            ],
        });
        const names = (spec: ReturnType<typeof statusSpec>) =>
            probe(1, host, spec)
                .json()
                .containers.map((c: { name: string }) => c.name);
        expect(names(statusSpec(state))).toEqual(["/vllm-ray-worker"]);
        expect(names(statusSpec(state, { cluster: "blue", defaultCluster: false }))).toEqual(["/blue-ray-worker"]);
        expect(names(statusSpec(state, { cluster: "green", defaultCluster: false }))).toEqual([]);
    });

    test("a worker: its containers, no /metrics and no Ray", () => {
        const host = standInHost(state, "spark-2", {
            ps: [cid("c")],
            inspect: [
                inspectLine({ id: cid("c"), name: "vllm-ray-worker", role: "ray-worker", state: "exited", exitCode: 137, maxStarts: 4 }),
            ],
        });
        const j = probe(1, host).json();
        expect(j.containers).toHaveLength(1);
        expect(j.containers[0]).toMatchObject({ state: "exited", exitCode: 137 });
        expect(j).not.toHaveProperty("metrics");
        expect(j).not.toHaveProperty("ray");
        expect(host.calls().some((c) => c.startsWith("curl") || c.startsWith("docker exec"))).toBe(false);
    });

    test("what fails is said in its place: docker refused, no server on the port, Ray missing a host", () => {
        const denied = "permission denied while trying to connect to the Docker daemon socket at unix:///var/run/docker.sock";
        const ray = "ray-members: cannot ask Ray's GCS at 10.232.0.11:6379: timed out\n";
        const j = probe(0, headHost({ dockerError: denied, metrics: undefined, ray, rayCode: 1 })).json();
        expect(j.docker).toEqual({ ok: false, error: denied });
        expect(j.containers).toEqual([]);
        expect(j.metrics).toEqual({ ok: false, error: "curl: (7) Failed to connect to 127.0.0.1 port 8000: Connection refused" });
        // docker itself failed here, so the Ray probe's exec did too: its words are the stand-in's
        expect(j.ray.ok).toBe(false);
        const ok = probe(0, headHost({ metrics: undefined, ray, rayCode: 1 })).json();
        expect(ok.ray).toEqual({ ok: false, text: ray.trim() });
    });

    test("whatever bytes the init's files hold, the answer is valid JSON holding them (controls escaped, NUL dropped)", () => {
        const host = headHost();
        const hostile = Buffer.concat([
            Buffer.from(`${cid("b")} healthy\x1b[2J\x1b[H\r\x07\x7f"\\ \u009b31m\u2028\u2029 `),
            Buffer.from([0xff, 0x00]),
            Buffer.from("end\n"),
        ]);
        fs.writeFileSync(path.join(host.init, "vllm-serve.status"), hostile);
        // a link planted as a file, and a FIFO: neither is followed or waited on
        fs.symlinkSync("/etc/passwd", path.join(host.init, "vllm-serve.starts"));
        spawnSync("mkfifo", [path.join(host.init, "vllm-ray-head.status")]);
        const r = probe(0, host);
        expect(r.status).toBe(0);
        const j = r.json();
        // every byte but NUL, as the file holds it (an invalid UTF-8 byte reads as U+FFFD)
        expect(j.containers[1].initStatus).toBe(hostile.subarray(0, hostile.indexOf(0)).toString() + "end");
        expect(j.containers[1].initStatus).toContain('\x1b[2J\x1b[H\r\x07\x7f"\\ \u009b31m\u2028\u2029 \ufffdend');
        expect(j.containers[1].initStarts).toBeNull();
        expect(j.containers[0].initStatus).toBeNull();
    });

    test("a lying docker: a name that would leave the init directory reads no file; lines that are no container are dropped", () => {
        const outside = path.join(state, "secret");
        fs.writeFileSync(outside, `${cid("e")} 3\n`);
        const host = headHost({
            ps: [cid("e"), cid("f")],
            inspect: [
                inspectLine({ id: cid("e"), name: "../../secret", role: "serve", maxStarts: 4 }),
                "Error: No such object: x\x1b[2J",
                inspectLine({ id: cid("f"), name: "vllm-serve\u001b]0;x\u0007", role: "serve", maxStarts: 4 }),
            ],
        });
        fs.writeFileSync(path.join(host.init, "vllm-serve.starts"), `${cid("f")} 1\n`);
        const r = probe(0, host);
        expect(r.status).toBe(0);
        const j = r.json();
        expect(j.containers.map((c: { name: string }) => c.name)).toEqual(["/../../secret", "/vllm-serve\u001b]0;x\u0007"]);
        // neither name is a plain container name: no init file is read for either
        expect(j.containers.map((c: { initStarts: unknown }) => c.initStarts)).toEqual([null, null]);
    });

    test("unknown or missing arguments are refused, naming them", () => {
        const [sh, ...rest] = localStepArgv(statusProbeStep(statusSpec(state), NODES[1]));
        const script = rest.slice(0, 1);
        const unknown = spawnSync(sh, [...script, "nod=spark-2"], { encoding: "utf8" });
        expect(unknown.status).toBe(2);
        expect(unknown.stderr).toBe("status_probe: unknown argument: nod=spark-2\n");
        const missing = spawnSync(sh, [...script, "node=spark-2"], { encoding: "utf8" });
        expect(missing.status).toBe(2);
        expect(missing.stderr).toBe("status_probe: missing argument init-dir\n");
    });
});

/**
 * Faults on the simulated hosts through the real engine (`npm run test:faults`, tests/faults/run.sh): the `local`
 * stack (Ray backend, real vLLM) is deployed once, then each test breaks one thing the way it breaks in the field
 * and checks what the program does about it. Each test records one row (fault, expected, observed) in
 * $VCL_FAULTS_RESULTS for the README's table.
 */
import * as fs from "fs";
import * as os from "os";
import * as path from "path";
import { apiKeyHostPath } from "../../infra/builders/node";
import { CONTAINER } from "../../infra/contract";
import { OpResult, Project, changed, destroy, editConfig, expectOk, openProject, up } from "../integration/engine";
import { Hosts, runArgv, sshdAccepted, stackConfig, waitFor } from "../integration/hosts";
import { chat, request } from "../integration/support";

const STACK = "local";
const TESTBED = process.env.VCL_TESTBED_DIR ?? "/var/lib/vllm-cluster-testbed";
const RESULTS = process.env.VCL_FAULTS_RESULTS;
const head = "spark-1";
const worker = "spark-2";
const rows: { fault: string; expected: string; observed: string; seconds: number }[] = [];

/**
 * The only routes that answer without the key (infra/scripts/vllm_cluster_guard.py): vLLM's own --api-key guards
 * only /v1 and a few prefixes, and left /invocations (completions), /tokenize, /scale_elastic_ep and more open.
 */
const KNOWN_OPEN = ["/health", "/metrics", "/ping", "/version"];

let p: Project;
let hosts: Hosts;
let endpoint = "";
let apiKey = "";
let model = "";
let keyFile = "";

function row(fault: string, expected: string, observed: string, r?: OpResult): void {
    rows.push({ fault, expected, observed, seconds: r ? Math.round(r.seconds) : 0 });
}

async function serving(key = apiKey): Promise<number> {
    return (await chat(endpoint, model, key).catch(() => ({ status: 0 }))).status;
}

async function rayIds(): Promise<string[]> {
    return [await hosts.containerId(head, CONTAINER.rayHead), await hosts.containerId(worker, CONTAINER.rayWorker)];
}

/** Restores the simulated hosts' sshd and Docker engines (idempotent: starts only what is not running). */
/** Makes spark-2 unreachable: its sshd stops (restoreHosts starts it again). */
async function stopWorkerSshd(): Promise<void> {
    await runArgv(["sh", "-c", "kill $(cat /run/vcl-h2/sshd.pid)"]);
}

async function restoreHosts(): Promise<void> {
    const r = await runArgv(["tests/testbed/testbed", "up", "2"], { timeoutMs: 600_000 });
    if (r.code !== 0) throw new Error(`testbed up 2: ${r.stderr}`);
}

beforeAll(async () => {
    p = await openProject(STACK, "vcl-faults-");
    hosts = new Hosts(stackConfig(p.stackFile));
    model = hosts.cfg.model.servedName;
    keyFile = apiKeyHostPath(hosts.cfg.stateDir, head);
    for (const n of [head, worker]) {
        await hosts.on(
            n,
            ["sh", "-c", "docker rm -f $(docker ps -aq --filter label=vllm-cluster.managed=true) 2>/dev/null; true"],
            120_000,
        );
    }
    const r = expectOk(await up(p));
    endpoint = String(r.outputs.endpoint);
    apiKey = String(r.outputs.apiKey);
    expect(await serving()).toBe(200);
}, 1_200_000);

afterAll(async () => {
    if (RESULTS) fs.writeFileSync(RESULTS, JSON.stringify(rows, null, 2) + "\n");
    if (p) {
        await restoreHosts().catch(() => undefined);
        await destroy(p);
    }
}, 900_000);

test("API surface: every route the server answers without the key is read-only and known", async () => {
    const spec = JSON.parse((await request("GET", `${endpoint.replace(/\/v1$/, "")}/openapi.json`, { key: apiKey })).body) as {
        paths: Record<string, Record<string, unknown>>;
    };
    const base = endpoint.replace(/\/v1$/, "");
    const open: string[] = [];
    for (const [route, methods] of Object.entries(spec.paths)) {
        if (route.includes("{")) continue;
        // Safe probe: a GET route is read-only; a POST-only route is asked with GET, so only the auth layer (which
        // runs before routing) can answer: 401 means guarded, 405 means the request reached the router unguarded.
        const status = (await request("GET", base + route, { timeoutMs: 10_000 })).status;
        if (status !== 401) open.push(`${route} (${Object.keys(methods).join("/").toUpperCase()}: ${status})`);
    }
    row("API routes without the key", `only ${KNOWN_OPEN.join(", ")} open`, `answered without the key: ${open.join(", ")}`);
    expect(open.map((o) => o.split(" ")[0]).sort()).toEqual(KNOWN_OPEN);
}, 120_000);

test("listening sockets while serving: the Ray dashboard only on loopback, nothing on the management address but SSH and the API", async () => {
    const out: string[] = [];
    for (const [n, ns] of [
        [head, "vcl-h1"],
        [worker, "vcl-h2"],
    ]) {
        const ss = await runArgv(["ip", "netns", "exec", ns, "ss", "-Hltn"]);
        const local = ss.stdout
            .split("\n")
            .filter(Boolean)
            .map((l) => l.trim().split(/\s+/)[3]);
        out.push(`${n}: ${[...new Set(local)].sort().join(" ")}`);
        const mgmt = hosts.node(n).sshHost;
        for (const a of local) {
            if (a.endsWith(`:${hosts.cfg.ray.dashboardPort}`)) expect(a).toBe(`127.0.0.1:${hosts.cfg.ray.dashboardPort}`);
            if (a.startsWith(`${mgmt}:`)) expect(a).toBe(`${mgmt}:22`);
        }
    }
    row("listening sockets", "dashboard on 127.0.0.1 only; management address: SSH only", out.join("; "));
}, 60_000);

test("Ray token authentication: a Ray client on the fabric without the token is refused", async () => {
    const gcs = `${hosts.node(head).fabricIp}:${hosts.cfg.ray.gcsPort}`;
    const script = `import ray; ray.init(address="${gcs}"); print("CONNECTED")`;
    const r = await hosts.on(
        worker,
        [
            "docker",
            "run",
            "--rm",
            "--network",
            "host",
            "--entrypoint",
            "/usr/bin/env",
            hosts.cfg.image.ref,
            "timeout",
            "40",
            "python3",
            "-c",
            script,
        ],
        120_000,
    );
    const out = r.stdout + r.stderr;
    expect(out).not.toContain("CONNECTED");
    expect(out).toMatch(/InvalidAuthToken|Unauthenticated/);
    row("Ray client without the token (from spark-2)", "refused", (/InvalidAuthToken[^\n]*/.exec(out) ?? ["refused"])[0].slice(0, 90));
}, 180_000);

async function restartServeAndExpectDown(what: string): Promise<void> {
    await hosts.docker(head, ["restart", "--time", "5", CONTAINER.serve], 120_000);
    // whatever the engine makes of it (the bind mount refused, or the entrypoint's check and bounded restarts),
    // the container ends stopped and nothing answers
    await waitFor(
        "vllm-serve stopped",
        async () => /^(exited|dead|created)/.test(await hosts.inspect(head, CONTAINER.serve, "{{.State.Status}}")),
        120_000,
        2000,
    );
    expect(await serving("")).not.toBe(200);
    expect(await serving()).not.toBe(200);
    const state = await hosts.inspect(head, CONTAINER.serve, "{{.State.Status}} {{.State.ExitCode}}");
    expect(state).not.toMatch(/^running/);
    row(`${what}, server restarted`, "server does not start (fails closed)", `container ${state}; no answer with or without a key`);
}

test.each([
    ["key file removed", ["rm", "-f"]],
    ["key file replaced by a directory", ["sh", "-c", 'rm -f "$0" && mkdir "$0"']],
])(
    "%s: a restarted server stays down; up --refresh installs the key again and serves",
    async (what, cmd) => {
        await hosts.must(head, [...cmd, keyFile]);
        await restartServeAndExpectDown(what);
        const r = expectOk(await up(p, { refresh: true }));
        expect([r.ops["serve-api-key-file"], r.ops["serve-container"], r.ops["serve-readiness"]]).toEqual(["update", "replace", "replace"]);
        expect(await serving()).toBe(200);
        expect(await serving("")).toBe(401);
        row(
            `${what}: up --refresh`,
            "key installed again, server replaced, serving",
            `changed ${changed(r).join(", ")}; 200 with key, 401 without`,
            r,
        );
    },
    900_000,
);

test("key rotation: up --replace of the key restarts the server with the new key; the old key gets 401; Ray untouched", async () => {
    const before = await rayIds();
    const state = (await p.stack.exportStack()).deployment as { resources: { urn: string }[] };
    const urn = state.resources.map((x) => x.urn).find((u) => u.endsWith("RandomPassword::api-key"))!;
    const r = expectOk(await up(p, { replace: [urn] }));
    const newKey = String(r.outputs.apiKey);
    expect(newKey).not.toBe(apiKey);
    expect(await serving(apiKey)).toBe(401);
    expect(await serving(newKey)).toBe(200);
    expect(await rayIds()).toEqual(before);
    row("key rotation (up --replace api-key)", "old key 401, new key 200, Ray kept", `changed ${changed(r).join(", ")}`, r);
    apiKey = newKey;
}, 900_000);

test("crash loop: a flag vLLM rejects stops after serve.maxRestarts restarts; up fails naming it; the fixed config converges", async () => {
    const good = [...hosts.cfg.serve.extraArgs];
    editConfig(p, (c) => ((c.serve as Record<string, unknown>).extraArgs = [...good, "--no-such-flag"]));
    const bad = await up(p);
    expect(bad.ok).toBe(false);
    expect(bad.output + bad.error).toMatch(/vllm-serve on node spark-1: container is exited before \/health answered/);
    const restarts = await hosts.inspect(head, CONTAINER.serve, "{{.RestartCount}} {{.State.Status}}");
    expect(restarts).toBe(`${hosts.cfg.serve.maxRestarts} exited`);
    row(
        "serve flag vLLM rejects (crash loop)",
        `at most ${hosts.cfg.serve.maxRestarts} restarts, up fails naming it`,
        `RestartCount/state: ${restarts}`,
        bad,
    );
    editConfig(p, (c) => ((c.serve as Record<string, unknown>).extraArgs = good));
    const fixed = expectOk(await up(p));
    expect(await serving()).toBe(200);
    row("crash loop: config fixed, up", "converges, no manual cleanup", `changed ${changed(fixed).join(", ")}`, fixed);
}, 1_200_000);

test("host key mismatch: refused before any command runs on that host, naming it", async () => {
    // The pinned key of spark-2 replaced by another one in the known_hosts file the stack uses: what an operator
    // sees after the host's key was regenerated (or someone answers in its place).
    const file = hosts.cfg.ssh.knownHostsFile;
    const original = fs.readFileSync(file, "utf8");
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), "vcl-faults-kh-"));
    await runArgv(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", path.join(dir, "other")]);
    const other = fs.readFileSync(path.join(dir, "other.pub"), "utf8").split(" ").slice(0, 2).join(" ");
    const ip = hosts.node(worker).sshHost;
    const accepted = sshdAccepted(TESTBED, [worker])[worker];
    let r: OpResult;
    try {
        fs.writeFileSync(
            file,
            original
                .split("\n")
                .map((l) => (l.split(" ")[0].split(",").includes(ip) ? `${l.split(" ")[0]} ${other}` : l))
                .join("\n"),
        );
        r = await up(p, { refresh: true });
    } finally {
        fs.writeFileSync(file, original);
        fs.rmSync(dir, { recursive: true, force: true });
    }
    expect(r.ok).toBe(false);
    expect(r.output + r.error).toMatch(/10\.231\.0\.12/);
    expect(r.output + r.error).toMatch(/REMOTE HOST IDENTIFICATION HAS CHANGED|Host key verification failed/);
    expect(sshdAccepted(TESTBED, [worker])[worker]).toBe(accepted);
    row(
        "host key of spark-2 changed",
        "refused, host named, no session opened",
        `failed after ${Math.round(r.seconds)} s naming 10.231.0.12; 0 sessions accepted`,
        r,
    );
    expect(await serving()).toBe(200); // nothing was touched
}, 600_000);

test("unreachable host: up --refresh fails within 60 s naming it; when it returns, up converges", async () => {
    await stopWorkerSshd();
    const r = await up(p, { refresh: true });
    expect(r.ok).toBe(false);
    expect(r.output + r.error).toMatch(/10\.231\.0\.12/);
    expect(r.seconds).toBeLessThan(60);
    row(
        "sshd of spark-2 stopped: up --refresh",
        "fails within 60 s naming the host",
        `failed after ${Math.round(r.seconds)} s naming 10.231.0.12`,
        r,
    );
    await restoreHosts();
    const back = expectOk(await up(p, { refresh: true }));
    expect(await serving()).toBe(200);
    row("spark-2 reachable again: up --refresh", "converges", `changed ${changed(back).join(", ") || "nothing"}`, back);
}, 900_000);

test("a host's Docker engine restarted (as after a reboot): one up --refresh brings the cluster back", async () => {
    const pid = fs.readFileSync("/run/vcl-h2/docker.pid", "utf8").trim();
    await runArgv(["kill", pid]);
    // the engine stops its containers first: wait until the process is gone before starting it again
    await waitFor("spark-2's engine to exit", async () => (await runArgv(["kill", "-0", pid])).code !== 0, 120_000);
    await restoreHosts();
    await new Promise((r) => setTimeout(r, 20_000));
    const byItself = await serving();
    const r = expectOk(await up(p, { refresh: true }));
    expect(await serving()).toBe(200);
    row(
        "spark-2's engine restarted",
        "back after one up --refresh",
        `serving by itself: ${byItself === 200 ? "yes" : `no (HTTP ${byItself})`}; up --refresh changed ${changed(r).join(", ")}`,
        r,
    );
}, 1_200_000);

test("destroy with a host unreachable fails naming it; when it returns, destroy leaves nothing", async () => {
    await stopWorkerSshd();
    const r = await destroy(p);
    expect(r.ok).toBe(false);
    expect(r.output + r.error).toMatch(/10\.231\.0\.12/);
    expect(r.seconds).toBeLessThan(60);
    await restoreHosts();
    const d = expectOk(await destroy(p));
    for (const n of [head, worker]) expect(await hosts.projectContainers(n, STACK)).toEqual([]);
    expect((await hosts.on(head, ["test", "-e", keyFile])).code).toBe(1);
    row(
        "destroy with spark-2 unreachable, then again",
        "fails naming the host; then nothing left",
        `failed after ${Math.round(r.seconds)} s; then 0 containers, no key file`,
        d,
    );
}, 900_000);

/**
 * `npm run bench` (bench/run.sh): `pulumi up` of the `local` stack on the simulated hosts against the manual
 * procedure (bench/manual.sh) on the same hosts, image and model, side by side in one run, each figure over
 * VCL_BENCH_REPEATS repeats (min, median, max). Writes bench/results.json, bench/timeline.{txt,json} (the first
 * cold up's engine events, for setup/timeline.py), bench/manual-steps.txt (the manual procedure's timed steps) and
 * prints a table. Its assertions are only that each measured run worked (the deployment answered); the goals are
 * reported, not enforced.
 */
import * as fs from "fs";
import * as path from "path";
import { Project, destroy, editConfig, expectOk, openProject, up, writeEvents } from "../tests/integration/engine";
import { Hosts, runArgv, sshdLogMarks, sshdTrafficSince, stackConfig } from "../tests/integration/hosts";
import { chat } from "../tests/integration/support";
// eslint-disable-next-line @typescript-eslint/no-require-imports
const { resultsDir } = require("../tests/lib/results.js") as { resultsDir: () => string };

const STACK = "local";
const TESTBED = process.env.VCL_TESTBED_DIR ?? "/var/lib/vllm-cluster-testbed";
const REPEATS = Number(process.env.VCL_BENCH_REPEATS ?? "3");
/**
 * The smoke (npm test): the Pulumi side once, no manual procedure, no image stream and no image copy (the image
 * stays on every host): the bench itself works.
 */
const SMOKE = process.env.VCL_BENCH_SMOKE === "1";
/** Results go to the run's results directory, never into the tree (bench/run.sh and distribution.sh set it). */
const OUT = process.env.VCL_BENCH_OUT ?? path.join(resultsDir(), "bench");
fs.mkdirSync(OUT, { recursive: true });
const MANUAL_KEY = "bench-manual-procedure-key";
/** Hosts in the measured cluster: the local stack's two, or more (spark-3.. like spark-2, tensor parallel = hosts). */
const HOSTS_N = Number(process.env.VCL_BENCH_HOSTS ?? "2");
const RESULTS = HOSTS_N === 2 ? "results.json" : `results-${HOSTS_N}hosts.json`;
/** bench/manual.sh's step lines with their times, each repeat's: where the manual procedure's minutes go. */
const MANUAL_STEPS = HOSTS_N === 2 ? "manual-steps.txt" : `manual-steps-${HOSTS_N}hosts.txt`;

type Figure = { runs: number[]; min: number; median: number; max: number; unit: string; note: string };
const runs: Record<string, { unit: string; note: string; values: number[] }> = {};

function record(name: string, value: number, unit: string, note: string): void {
    (runs[name] ??= { unit, note, values: [] }).values.push(Math.round(value * 100) / 100);
}

function summarize(): Record<string, Figure> {
    const out: Record<string, Figure> = {};
    for (const [name, r] of Object.entries(runs)) {
        const s = [...r.values].sort((a, b) => a - b);
        out[name] = {
            runs: r.values,
            min: s[0],
            median: s[Math.floor((s.length - 1) / 2)],
            max: s[s.length - 1],
            unit: r.unit,
            note: r.note,
        };
    }
    return out;
}

let p: Project;
let hosts: Hosts;
const names = () => hosts.cfg.nodes.map((n) => n.name);

/**
 * Runs `f`, returns its seconds, the ssh connections the hosts accepted meanwhile and the sessions those carried
 * (more sessions than connections: some ran inside a shared connection).
 */
async function measured<T>(f: () => Promise<T>): Promise<{ value: T; seconds: number; ssh: number; sessions: number }> {
    const marks = sshdLogMarks(TESTBED, names());
    const t0 = Date.now();
    const value = await f();
    const seconds = (Date.now() - t0) / 1000;
    const traffic = Object.values(sshdTrafficSince(TESTBED, marks));
    const sum = (k: "connections" | "sessions") => traffic.reduce((a, t) => a + t[k], 0);
    return { value, seconds, ssh: sum("connections"), sessions: sum("sessions") };
}

function manualEnv(): Record<string, string> {
    const c = hosts.cfg;
    const env: Record<string, string> = {
        MANUAL_SSH_CONFIG: path.join(TESTBED, "ssh", "config"),
        MANUAL_HOSTS: c.nodes.map((n) => `${n.name}=${n.fabricIp}`).join(" "),
        MANUAL_IMAGE: c.image.ref,
        MANUAL_MODEL: `${c.model.hostPath}:${c.model.containerPath}:${c.model.servedName}`,
        MANUAL_SERVE_ARGS: ["--max-model-len", String(c.serve.maxModelLen), ...c.serve.extraArgs].join(" "),
        MANUAL_PORT: String(c.serve.port),
        MANUAL_KEY,
    };
    c.nodes.forEach(
        (n, i) =>
            (env[`MANUAL_ENV_${i}`] = Object.entries(n.env)
                .map(([k, v]) => `${k}=${v}`)
                .join(" ")),
    );
    return env;
}

async function manual(action: "up" | "down"): Promise<void> {
    const r = await runArgv(
        ["env", ...Object.entries(manualEnv()).map(([k, v]) => `${k}=${v}`), "bash", path.join(__dirname, "manual.sh"), action],
        {
            timeoutMs: 1_200_000,
        },
    );
    if (action === "up") {
        // its step lines with their times, next to the timeline of the Pulumi side
        fs.appendFileSync(path.join(OUT, MANUAL_STEPS), `--- bench/manual.sh up, ${new Date().toISOString()}\n${r.stderr}`);
    }
    if (r.code !== 0) {
        throw new Error(`bench/manual.sh ${action} failed (exit ${r.code}): ${r.stderr.trim().split("\n").slice(-10).join("\n")}`);
    }
}

/**
 * No container of the program or of the manual procedure on any host, and no image on the hosts it is copied to.
 * The smoke keeps the image where it is: it shows that the bench works, not what a copy costs (the integration
 * suite copies the image in its cold up and again when it heals a removed one), and a copy is a third of its time.
 */
async function clean(): Promise<void> {
    await manual("down");
    for (const n of hosts.cfg.nodes) {
        await hosts.on(
            n.name,
            ["sh", "-c", "docker rm -f $(docker ps -aq --filter label=vllm-cluster.managed=true) 2>/dev/null; true"],
            120_000,
        );
        if (!SMOKE && n.name !== hosts.cfg.image.sourceNode) {
            await hosts.docker(n.name, ["image", "rm", "--force", hosts.cfg.image.ref]);
        }
    }
}

async function benchManual(): Promise<void> {
    await clean();
    const m = await measured(() => manual("up"));
    record("manual: bring-up", m.seconds, "s", "bench/manual.sh up: image copy, Ray head, worker, ray status, serve, a completion");
    record("manual: ssh connections", m.ssh, "count", "sshd 'Accepted publickey' lines during bench/manual.sh up");
    record("manual: ssh sessions", m.sessions, "count", "sshd 'Starting session' lines during bench/manual.sh up");
    const c = await chat(`http://${hosts.cfg.head.sshHost}:${hosts.cfg.serve.port}/v1`, hosts.cfg.model.servedName, MANUAL_KEY);
    expect(c.status).toBe(200);
    await manual("down");
}

async function benchPulumi(first: boolean): Promise<void> {
    await clean();
    expectOk(await destroy(p)); // the containers are gone: the state follows
    const cold = await measured(() => up(p));
    expectOk(cold.value);
    const copy = SMOKE ? "the image already on every host (smoke)" : "image copied";
    record("pulumi: cold up", cold.seconds, "s", `pulumi up from an empty stack, ${copy}, until readiness answers`);
    record("pulumi: ssh connections, cold up", cold.ssh, "count", "sshd 'Accepted publickey' lines during the cold up");
    record("pulumi: ssh sessions, cold up", cold.sessions, "count", "sshd 'Starting session' lines during the cold up");
    if (first) {
        writeEvents(cold.value, path.join(OUT, "timeline-events.jsonl"));
    }
    const key = String(cold.value.outputs.apiKey);
    expect((await chat(String(cold.value.outputs.endpoint), hosts.cfg.model.servedName, key)).status).toBe(200);

    const noop = await measured(() => up(p));
    expectOk(noop.value);
    record("pulumi: no-op up", noop.seconds, "s", "a second pulumi up with nothing changed");
    record("pulumi: ssh connections, no-op up", noop.ssh, "count", "sshd 'Accepted publickey' lines during the no-op up");

    if (!SMOKE) {
        const before = hosts.cfg.serve.maxModelLen ?? 512;
        editConfig(p, (c) => ((c.serve as Record<string, unknown>).maxModelLen = before - 128));
        const change = await measured(() => up(p));
        editConfig(p, (c) => ((c.serve as Record<string, unknown>).maxModelLen = before));
        expectOk(change.value);
        record("pulumi: serve-argument change", change.seconds, "s", "serve.maxModelLen changed: serve and readiness replaced");
    }

    const d = await measured(() => destroy(p));
    expectOk(d.value);
    record("pulumi: destroy", d.seconds, "s", "pulumi destroy");
}

/** The image stream itself: `docker save | ssh | docker load` and a raw `cat > /dev/null` of the same bytes. */
async function benchImageLink(): Promise<void> {
    const { ref, sourceNode } = hosts.cfg.image;
    const dst = names().find((n) => n !== sourceNode)!;
    const cfg = path.join(TESTBED, "ssh", "config");
    const pipe = async (sink: string) => {
        const t0 = Date.now();
        const r = await runArgv(
            ["bash", "-o", "pipefail", "-c", `ssh -F ${cfg} ${sourceNode} docker save ${ref} | ssh -F ${cfg} ${dst} '${sink}'`],
            {
                timeoutMs: 1_200_000,
            },
        );
        if (r.code !== 0) throw new Error(`image stream to ${dst}: ${r.stderr}`);
        return { seconds: (Date.now() - t0) / 1000, out: r.stdout.trim() };
    };
    await hosts.docker(dst, ["image", "rm", "--force", ref]);
    const load = await pipe("docker load >/dev/null");
    const raw = await pipe("wc -c");
    const bytes = Number(raw.out);
    record("image: docker save | ssh | docker load", load.seconds, "s", `${(bytes / 1e9).toFixed(2)} GB from ${sourceNode} to ${dst}`);
    record("image: raw ssh cat of the same bytes", raw.seconds, "s", "docker save | ssh cat: the link and the save alone");
    record("image: throughput ratio (load / raw)", raw.seconds / load.seconds, "ratio", "bytes per second of the copy over the raw stream");
}

beforeAll(async () => {
    fs.rmSync(path.join(OUT, MANUAL_STEPS), { force: true });
    p = await openProject(STACK, "vcl-bench-");
    if (HOSTS_N > 2) {
        editConfig(p, (c) => {
            const nodes = c.nodes as (Record<string, unknown> & { env: Record<string, string> })[];
            for (let i = 3; i <= HOSTS_N; i++) {
                const at = `${10 + i}`;
                // two cores: ranks alternate between them, as spark-1 and spark-2 do
                const env = { ...nodes[1].env, OMP_PLACES: `{${(i - 1) % 2}}` };
                nodes.push({ ...nodes[1], name: `spark-${i}`, sshHost: `10.231.0.${at}`, fabricIp: `10.232.0.${at}`, env });
            }
            (c.serve as Record<string, unknown>).tensorParallelSize = HOSTS_N;
        });
    }
    hosts = new Hosts(stackConfig(p.stackFile));
}, 120_000);

afterAll(async () => {
    if (p) {
        await clean().catch(() => undefined);
        await destroy(p);
    }
}, 600_000);

test(
    "bench: pulumi up against the manual procedure, change costs, image stream",
    async () => {
        for (let i = 0; i < (SMOKE ? 0 : REPEATS); i++) {
            // alternate the order so neither always runs on a warmer machine
            if (i % 2 === 0) {
                await benchPulumi(i === 0);
                await benchManual();
            } else {
                await benchManual();
                await benchPulumi(false);
            }
            await benchImageLink();
        }
        if (SMOKE) await benchPulumi(true);
        const figures = summarize();
        const pairs = [
            ["cold up / manual bring-up", "pulumi: cold up", "manual: bring-up"],
            ["no-op up / cold up", "pulumi: no-op up", "pulumi: cold up"],
            ["serve-argument change / cold up", "pulumi: serve-argument change", "pulumi: cold up"],
        ];
        const ratios = Object.fromEntries(
            pairs.filter(([, a, b]) => figures[a] && figures[b]).map(([k, a, b]) => [k, figures[a].median / figures[b].median]),
        );
        const result = { repeats: REPEATS, hosts: names().length, when: new Date().toISOString(), figures, ratios };
        fs.writeFileSync(path.join(OUT, RESULTS), JSON.stringify(result, null, 2) + "\n");
        expect(figures["pulumi: ssh connections, no-op up"].max).toBe(0);
    },
    REPEATS * 1_800_000,
);

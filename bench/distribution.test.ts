/**
 * `npm run bench:distribution` (bench/distribution.sh): the time to put one image on N = 1, 2 and 4 simulated
 * hosts with every host's management link capped (tc, both directions), by the program's two distributions run
 * through their real providers: `chain` (ImageChain: each host loads and forwards at once) and `relay`
 * (ImagePresence per host: one `docker save | docker load` stream per host through the operator), and a raw
 * `ssh src docker save | ssh dst cat > /dev/null` of the same bytes over the same links. The source is spark-1;
 * the targets are spark-2.. in order. The image is random bytes (incompressible) made on spark-1 for the purpose.
 * Then the same for a model directory (`model.source`): ModelChain copies a Hugging Face-cache-like directory
 * (weights behind symlinks into blobs/) from spark-1 to N hosts, against a raw `ssh src tar -ch | ssh dst wc -c` of
 * the same bytes. It lives in the testbed's per-host directory (<state>/own), which each host sees on its own.
 * Writes distribution.json next to results.json and prints a table. Its only assertions are that each copy worked
 * (the loaded image ID, or every file's checksum, equals the source's).
 */
import * as fs from "fs";
import * as path from "path";
import { imageEnsureScript, imageInspectScript } from "../infra/builders/image";
import { shellQuote } from "../infra/builders/quote";
import type { SshTarget } from "../infra/builders/ssh";
import { imageChainProvider } from "../infra/providers/imageChain";
import { imagePresenceProvider } from "../infra/providers/imagePresence";
import { modelChainProvider } from "../infra/providers/modelChain";
import { runArgv, sharedSshSocketDir } from "../tests/integration/hosts";

const TESTBED = process.env.VCL_TESTBED_DIR ?? "/var/lib/vllm-cluster-testbed";
const OUT = process.env.VCL_BENCH_OUT ?? __dirname;
const REPEATS = Number(process.env.VCL_BENCH_REPEATS ?? "3");
const SIZES = (process.env.VCL_DIST_N ?? "1,2,4").split(",").map(Number);
const MB = Number(process.env.VCL_DIST_MB ?? "256");
/** Each host's management link, both directions (tc tbf); "off" leaves the links as they are. */
const RATE = process.env.VCL_DIST_RATE ?? "200mbit";
const REF = `vcl-bench-blob:${MB}m`;
const MODEL_MB = Number(process.env.VCL_DIST_MODEL_MB ?? MB);
/** The bench model's root in every host's own directory, and the snapshot directory the program copies. */
const MODEL_ROOT = path.join(TESTBED, "own", "bench-model");
const MODEL_DIR = path.join(MODEL_ROOT, "snapshots", "main");

interface TestbedHost {
    name: string;
    index: number;
    netns: string;
    mgmtIp: string;
    sshPort: number;
}
const tb = JSON.parse(fs.readFileSync(path.join(TESTBED, "hosts.json"), "utf8")) as {
    sshUser: string;
    sshPrivateKey: string;
    knownHostsFile: string;
    sshConfig: string;
    hosts: TestbedHost[];
};
const target = (h: TestbedHost): SshTarget => ({
    user: tb.sshUser,
    host: h.mgmtIp,
    port: h.sshPort,
    privateKeyPath: tb.sshPrivateKey,
    knownHostsFile: tb.knownHostsFile,
});
const [src, ...dsts] = tb.hosts;
type Series = Record<string, number[]>;
const record = (values: Series, k: string, v: number) => (values[k] ??= []).push(Math.round(v * 100) / 100);
/** What distribution.json gets: one section per measured test. */
const report: Record<string, unknown> = { repeats: REPEATS, rate: RATE };

async function sh(script: string, what: string, timeoutMs = 600_000): Promise<string> {
    const r = await runArgv(["bash", "-c", script], { timeoutMs });
    if (r.code !== 0) throw new Error(`${what} failed (exit ${r.code}): ${r.stderr.trim().split("\n").slice(-8).join("\n")}`);
    return r.stdout;
}
const on = (h: TestbedHost, cmd: string, what: string) => sh(`ssh -F ${tb.sshConfig} ${h.name} ${shellQuote(cmd)}`, what);

/** Caps (or uncaps) a host's management link both ways: the bridge-side veth (into the host) and mgmt0 (out). */
async function cap(h: TestbedHost, rate: string): Promise<void> {
    const outside = `vcl-h${h.index}-m`;
    const tbf = `tbf rate ${rate} burst 256kb latency 200ms`;
    const cmds =
        rate === "off"
            ? [
                  `tc qdisc del dev ${outside} root 2>/dev/null || true`,
                  `ip netns exec ${h.netns} tc qdisc del dev mgmt0 root 2>/dev/null || true`,
              ]
            : [`tc qdisc replace dev ${outside} root ${tbf}`, `ip netns exec ${h.netns} tc qdisc replace dev mgmt0 root ${tbf}`];
    await sh(cmds.join(" && "), `tc on ${h.name}`);
}

async function clear(hs: TestbedHost[]): Promise<void> {
    await Promise.all(hs.map((h) => on(h, `docker image rm --force ${REF} >/dev/null 2>&1; true`, `clearing ${h.name}`)));
}

async function idOn(h: TestbedHost): Promise<string> {
    return (await sh(imageInspectScript(target(h), REF), `inspect on ${h.name}`)).trim();
}

/**
 * Closes the shared ssh connections this process's scripts opened (infra/builders/ssh.ts names their sockets after
 * the process that runs the scripts: here, this one). A `pulumi` operation starts with none, so each measured copy
 * does too, and pays for its connections as an up would.
 */
async function closeSharedConnections(): Promise<void> {
    const dir = sharedSshSocketDir();
    const mine = fs.existsSync(dir) ? fs.readdirSync(dir).filter((f) => f.startsWith(`${process.pid}-`)) : [];
    await Promise.all(mine.map((f) => runArgv(["ssh", "-o", `ControlPath=${path.join(dir, f)}`, "-O", "exit", "closing"])));
}

async function timed(f: () => Promise<unknown>): Promise<number> {
    await closeSharedConnections();
    const t0 = Date.now();
    await f();
    return (Date.now() - t0) / 1000;
}

async function chain(n: number): Promise<number> {
    const members = dsts.slice(0, n).map((h) => ({ node: h.name, target: target(h) }));
    return timed(() => imageChainProvider.create!({ ref: REF, source: { kind: "host", node: src.name, target: target(src) }, members }));
}

async function relay(n: number): Promise<number> {
    const origin = { kind: "host" as const, node: src.name, target: target(src) };
    return timed(() =>
        Promise.all(
            dsts.slice(0, n).map((h) =>
                imagePresenceProvider.create!({
                    node: h.name,
                    ref: REF,
                    ensureScript: imageEnsureScript(origin, target(h), h.name, REF),
                    inspectScript: imageInspectScript(target(h), REF),
                }),
            ),
        ),
    );
}

async function raw(): Promise<{ seconds: number; bytes: number }> {
    let out = "";
    const seconds = await timed(async () => {
        out = await sh(
            `set -o pipefail; ssh -F ${tb.sshConfig} ${src.name} docker save ${REF} | ssh -F ${tb.sshConfig} ${dsts[0].name} 'wc -c'`,
            "raw stream",
        );
    });
    return { seconds, bytes: Number(out.trim()) };
}

beforeAll(async () => {
    const need = Math.max(...SIZES);
    if (dsts.length < need) throw new Error(`N=${need} needs ${need + 1} simulated hosts; the testbed has ${tb.hosts.length}`);
    // an incompressible image of MB MiB, made on the source host
    await on(
        src,
        `docker image inspect ${REF} >/dev/null 2>&1 || { d=$(mktemp -d) && head -c ${MB}M /dev/urandom >"$d/blob" && ` +
            `tar -C "$d" -c blob | docker import - ${REF} >/dev/null; rc=$?; rm -rf "$d"; exit $rc; }`,
        "making the bench image",
    );
    const size = Number(await on(src, `docker image inspect --format '{{.Size}}' ${REF}`, "bench image size"));
    if (size < MB << 20) throw new Error(`bench image ${REF} on ${src.name} is ${size} bytes, expected ${MB} MiB`);
    for (const h of tb.hosts) await cap(h, RATE);
}, 600_000);

afterAll(async () => {
    for (const h of tb.hosts) await cap(h, "off").catch(() => undefined);
    await clear(dsts).catch(() => undefined);
    await clearModel(dsts).catch(() => undefined);
    // a run of one part (jest -t) keeps the other part's last figures
    const file = path.join(OUT, "distribution.json");
    if (report.image || report.model) {
        const prev = fs.existsSync(file) ? (JSON.parse(fs.readFileSync(file, "utf8")) as Record<string, unknown>) : {};
        const kept = { image: prev.image, model: prev.model };
        fs.writeFileSync(file, JSON.stringify({ ...kept, ...report }, null, 2) + "\n");
    }
}, 600_000);

interface Figures {
    figures: Record<string, { runs: number[]; min: number; median: number; max: number }>;
    med: (k: string) => number;
}
function summarize(values: Series): Figures {
    const med = (k: string) => {
        const v = [...values[k]].sort((a, b) => a - b);
        return v[Math.floor((v.length - 1) / 2)];
    };
    const figures = Object.fromEntries(
        Object.entries(values).map(([k, v]) => [k, { runs: v, min: Math.min(...v), median: med(k), max: Math.max(...v) }]),
    );
    return { figures, med };
}
function print(title: string, f: Figures["figures"], ratios: Record<string, number>): void {
    console.log(
        [
            `${title}, links capped at ${RATE}, ${REPEATS} repeat(s) (seconds: min / median / max)`,
            ...Object.entries(f)
                .filter(([k]) => k !== "bytes")
                .map(([k, v]) => `  ${k.padEnd(24)} ${[v.min, v.median, v.max].map((x) => x.toFixed(1).padStart(7)).join(" ")}`),
            ...Object.entries(ratios).map(([k, v]) => `  ${k.padEnd(30)} ${v.toFixed(2)}`),
        ].join("\n"),
    );
}
const top = Math.max(...SIZES);

test(
    "image distribution: chain and relay to N hosts over capped links, and the raw stream",
    async () => {
        const values: Series = {};
        const want = await idOn(src);
        for (let i = 0; i < REPEATS; i++) {
            for (const n of SIZES) {
                for (const [mode, run] of [
                    ["chain", chain],
                    ["relay", relay],
                ] as const) {
                    await clear(dsts);
                    record(values, `${mode} N=${n}`, await run(n));
                    for (const h of dsts.slice(0, n)) expect(await idOn(h)).toBe(want);
                }
            }
            const r = await raw();
            record(values, "raw ssh cat, 1 link", r.seconds);
            record(values, "bytes", r.bytes);
        }
        const { figures, med } = summarize(values);
        const ratios: Record<string, number> = {
            [`chain N=${top} / chain N=1`]: med(`chain N=${top}`) / med("chain N=1"),
            [`relay N=${top} / relay N=1`]: med(`relay N=${top}`) / med("relay N=1"),
            "throughput: raw / chain N=1": med("raw ssh cat, 1 link") / med("chain N=1"),
        };
        report.image = { imageMiB: MB, figures, ratios, when: new Date().toISOString() };
        print(`image distribution: ${MB} MiB image`, figures, ratios);
    },
    REPEATS * 1_800_000,
);

/** A member host as the model chain sees it. */
const member = (h: TestbedHost) => ({ node: h.name, target: target(h) });

/** Makes the bench model on spark-1 (once): weights as blobs behind relative symlinks, as a Hugging Face cache. */
async function makeModel(): Promise<void> {
    const shards = 4;
    const each = Math.max(1, Math.floor(MODEL_MB / shards));
    const blobs = path.join(MODEL_ROOT, "blobs");
    await on(
        src,
        `test -f ${MODEL_ROOT}/.complete || { rm -rf ${MODEL_ROOT} && mkdir -p ${blobs} ${MODEL_DIR} && cd ${MODEL_DIR} && ` +
            `for i in $(seq 1 ${shards}); do head -c ${each}M /dev/urandom >${blobs}/shard$i && ` +
            `ln -s ../../blobs/shard$i model-0000$i-of-0000${shards}.safetensors || exit 1; done && ` +
            `echo '{"model_type": "bench"}' >config.json && touch ${MODEL_ROOT}/.complete; }`,
        "making the bench model",
    );
}

async function clearModel(hs: TestbedHost[]): Promise<void> {
    await Promise.all(hs.map((h) => on(h, `rm -rf ${MODEL_ROOT}`, `clearing the model on ${h.name}`)));
}

test(
    "model distribution: the model chain to N hosts over capped links, and the raw stream",
    async () => {
        // each host must see its own directory there: a marker made on one host is not on another
        const marker = path.join(TESTBED, "own", `.bench-${process.pid}`);
        await on(src, `mkdir -p ${path.dirname(marker)} && touch ${marker}`, "marker on the source");
        const shared = (await on(dsts[0], `test -e ${marker} && echo shared || echo own`, "marker check")).trim();
        await on(src, `rm -f ${marker}`, "marker removal");
        if (shared !== "own") {
            throw new Error(
                `${src.name} and ${dsts[0].name} share ${path.dirname(marker)}: the testbed predates per-host directories (run tests/testbed/testbed down, then up)`,
            );
        }
        await makeModel();
        const values: Series = {};
        let digest = "";
        let files = 0;
        for (let i = 0; i < REPEATS; i++) {
            for (const n of SIZES) {
                await clearModel(dsts);
                let outs: Record<string, unknown> = {};
                const inputs = { hostPath: MODEL_DIR, source: member(src), members: dsts.slice(0, n).map(member) };
                record(values, `chain N=${n}`, await timed(async () => (outs = (await modelChainProvider.create!(inputs)).outs ?? {})));
                digest = String(outs.digest);
                files = Number(outs.files);
                expect(digest).toMatch(/^sha256:|^[0-9a-f]{64}$/);
                expect(outs.copied).toEqual(dsts.slice(0, n).map((h) => h.name));
                for (const h of dsts.slice(0, n)) expect((outs.digests as Record<string, string>)[h.name]).toBe(digest);
                // a second run finds every member complete and sends nothing
                const again = (await modelChainProvider.create!(inputs)).outs ?? {};
                expect(again.copied).toEqual([]);
            }
            let out = "";
            record(
                values,
                "raw ssh tar, 1 link",
                await timed(async () => {
                    out = await sh(
                        `set -o pipefail; ssh -F ${tb.sshConfig} ${src.name} tar -C ${MODEL_DIR} -chf - . | ssh -F ${tb.sshConfig} ${dsts[0].name} 'wc -c'`,
                        "raw model stream",
                    );
                }),
            );
            record(values, "bytes", Number(out.trim()));
        }
        await clearModel(dsts);
        const { figures, med } = summarize(values);
        const ratios: Record<string, number> = {
            [`chain N=${top} / chain N=1`]: med(`chain N=${top}`) / med("chain N=1"),
            "throughput: raw / chain N=1": med("raw ssh tar, 1 link") / med("chain N=1"),
        };
        report.model = { modelMiB: MODEL_MB, files, digest, figures, ratios, when: new Date().toISOString() };
        print(`model distribution: ${MODEL_MB} MiB in ${files} files (weights behind symlinks)`, figures, ratios);
    },
    REPEATS * 1_800_000,
);

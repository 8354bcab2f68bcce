/**
 * `npm run bench:distribution` (bench/distribution.sh): the time to put one image on N = 1, 2 and 4 simulated
 * hosts on a testbed shaped like the target (`testbed shape`: every host's management link slow, its fabric link
 * fast, both directions), by the program's distributions run through their real providers: `chain` with hops over
 * the fabric (ImageChain, distribution.network: fabric, the default), the same chain over the management network,
 * and `relay` (ImagePresence per host: one `docker save | docker load` stream per host through the operator), and a
 * raw `docker save | ssh cat > /dev/null` of the same bytes over each network. The source is spark-1; the targets
 * are spark-2.. in order. The image is random bytes (incompressible) made on spark-1 for the purpose.
 * Then the same for a model directory (`model.source`): ModelChain copies a Hugging Face-cache-like directory
 * (weights behind symlinks into blobs/) from spark-1 to N hosts over the fabric, with 1, 2 and 4 parallel streams
 * per link (distribution.modelStreams) on the shaped links and uncapped, against a raw `tar -ch | ssh` of the same
 * bytes over the fabric. It lives in the testbed's per-host directory (<state>/own), which each host sees on its own.
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
import { distributionSchema } from "../infra/configSchema/sections";
import { runArgv, sharedSshSocketDir } from "../tests/integration/hosts";
// eslint-disable-next-line @typescript-eslint/no-require-imports
const { resultsDir } = require("../tests/lib/results.js") as { resultsDir: () => string };

const TESTBED = process.env.VCL_TESTBED_DIR ?? "/var/lib/vllm-cluster-testbed";
/** Results go to the run's results directory, never into the tree (bench/run.sh and distribution.sh set it). */
const OUT = process.env.VCL_BENCH_OUT ?? path.join(resultsDir(), "bench");
fs.mkdirSync(OUT, { recursive: true });
const REPEATS = Number(process.env.VCL_BENCH_REPEATS ?? "3");
const SIZES = (process.env.VCL_DIST_N ?? "1,2,4").split(",").map(Number);
const MB = Number(process.env.VCL_DIST_MB ?? "512");
/** Each host's management and fabric links, both directions (`testbed shape`; "off": uncapped). */
const MGMT_RATE = process.env.VCL_DIST_MGMT_RATE ?? "100mbit";
const FABRIC_RATE = process.env.VCL_DIST_FABRIC_RATE ?? "1gbit";
/** The model chain's stream counts to compare, and whether to compare them on uncapped links too. */
const STREAMS = (process.env.VCL_DIST_STREAMS ?? "1,2,4").split(",").map(Number);
const UNCAPPED = process.env.VCL_DIST_UNCAPPED !== "0";
/** The program's default stream count (distribution.modelStreams). */
const DEFAULT_STREAMS = distributionSchema.parse({}).modelStreams;
const REF = `vcl-bench-blob:${MB}m`;
const MODEL_MB = Number(process.env.VCL_DIST_MODEL_MB ?? MB);
/** The image update: one new layer of UPDATE_MB MiB on the bench image, which every target already holds. */
const UPDATE_MB = Number(process.env.VCL_DIST_UPDATE_MB ?? "300");
const UPDATE_REF = `vcl-bench-update:${MB}m-${UPDATE_MB}m`;
/** The bench model's root in every host's own directory, and the snapshot directory the program copies. */
const MODEL_ROOT = path.join(TESTBED, "own", "bench-model");
const MODEL_DIR = path.join(MODEL_ROOT, "snapshots", "main");

interface TestbedHost {
    name: string;
    index: number;
    netns: string;
    mgmtIp: string;
    fabricIp: string;
    sshPort: number;
    dockerSocket: string;
}
const tb = JSON.parse(fs.readFileSync(path.join(TESTBED, "hosts.json"), "utf8")) as {
    sshUser: string;
    sshPrivateKey: string;
    knownHostsFile: string;
    sshConfig: string;
    hosts: (TestbedHost & { fabricInterface: string })[];
};
const target = (h: TestbedHost): SshTarget => ({
    user: tb.sshUser,
    host: h.mgmtIp,
    port: h.sshPort,
    privateKeyPath: tb.sshPrivateKey,
    knownHostsFile: tb.knownHostsFile,
});
/** A member host of a chain: reached by the host before it at its fabric IP, or at its management address. */
const member = (h: TestbedHost, network: "fabric" | "management" = "fabric") => ({
    node: h.name,
    target: target(h),
    peerHost: network === "fabric" ? h.fabricIp : h.mgmtIp,
});
const [src, ...dsts] = tb.hosts;
type Series = Record<string, number[]>;
const record = (values: Series, k: string, v: number) => (values[k] ??= []).push(Math.round(v * 100) / 100);
/** What distribution.json gets: one section per measured test. */
const report: Record<string, unknown> = { repeats: REPEATS, shape: { mgmt: MGMT_RATE, fabric: FABRIC_RATE } };

async function sh(script: string, what: string, timeoutMs = 600_000): Promise<string> {
    const r = await runArgv(["bash", "-c", script], { timeoutMs });
    if (r.code !== 0) throw new Error(`${what} failed (exit ${r.code}): ${r.stderr.trim().split("\n").slice(-8).join("\n")}`);
    return r.stdout;
}
const on = (h: TestbedHost, cmd: string, what: string) => sh(`ssh -F ${tb.sshConfig} ${h.name} ${shellQuote(cmd)}`, what);

/** Shapes every host's links (tests/testbed/testbed shape): "off" uncaps one. */
async function shape(mgmt: string, fabric: string): Promise<void> {
    const testbed = path.join(__dirname, "..", "tests", "testbed", "testbed");
    await sh(`${shellQuote(testbed)} shape mgmt=${mgmt} fabric=${fabric}`, "testbed shape");
}

/** A shell command run as host `h` would run it, inside its network namespace (its links, its engine). */
const inHost = (h: TestbedHost, cmd: string) => `ip netns exec ${h.netns} env DOCKER_HOST=${h.dockerSocket} sh -c ${shellQuote(cmd)}`;

/** An ssh to `to` over the fabric, as a chain hop dials it: its fabric IP, its key filed under its management IP. */
const fabricSsh = (to: TestbedHost, cmd: string) =>
    `ssh -F none -i ${tb.sshPrivateKey} -o IdentitiesOnly=yes -o UserKnownHostsFile=${tb.knownHostsFile} ` +
    `-o StrictHostKeyChecking=yes -o HostKeyAlias=${to.mgmtIp} -o BatchMode=yes ${tb.sshUser}@${to.fabricIp} ${shellQuote(cmd)}`;

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

/** The chain to the first n targets; over the fabric (the default) or over the management network. */
async function chain(
    n: number,
    network: "fabric" | "management" = "fabric",
    ref = REF,
    layers: "missing" | "all" = "missing",
): Promise<number> {
    const members = dsts.slice(0, n).map((h) => member(h, network));
    return timed(() => imageChainProvider.create!({ ref, source: { kind: "host", node: src.name, target: target(src) }, members, layers }));
}

/** Bytes the hosts received on their fabric links so far (the kernel's counters in each host's namespace). */
async function fabricRx(hs: typeof dsts): Promise<number> {
    const counts = await Promise.all(
        hs.map((h) =>
            sh(`ip netns exec ${h.netns} cat /sys/class/net/${h.fabricInterface}/statistics/rx_bytes`, `rx counter of ${h.name}`),
        ),
    );
    return counts.reduce((sum, c) => sum + Number(c.trim()), 0);
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

/** The image's bytes, once, from the source to the first target: over the fabric, or through the operator. */
async function raw(network: "fabric" | "management"): Promise<{ seconds: number; bytes: number }> {
    let out = "";
    const script =
        network === "fabric"
            ? `set -o pipefail; ${inHost(src, `docker save ${REF} | ${fabricSsh(dsts[0], "wc -c")}`)}`
            : `set -o pipefail; ssh -F ${tb.sshConfig} ${src.name} docker save ${REF} | ssh -F ${tb.sshConfig} ${dsts[0].name} 'wc -c'`;
    const seconds = await timed(async () => {
        out = await sh(script, `raw stream over the ${network} network`);
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
    await shape(MGMT_RATE, FABRIC_RATE);
}, 600_000);

afterAll(async () => {
    await shape("off", "off").catch(() => undefined);
    await clear(dsts).catch(() => undefined);
    await Promise.all(
        tb.hosts.map((h) => on(h, `docker image rm --force ${UPDATE_REF} >/dev/null 2>&1; true`, `clearing ${h.name}`)),
    ).catch(() => undefined);
    await clearModel(dsts).catch(() => undefined);
    // a run of one part (jest -t) keeps the other part's last figures
    const file = path.join(OUT, "distribution.json");
    if (report.image || report.model || report.update) {
        const prev = fs.existsSync(file) ? (JSON.parse(fs.readFileSync(file, "utf8")) as Record<string, unknown>) : {};
        const kept = { image: prev.image, model: prev.model, update: prev.update };
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
            `${title}, links: management ${MGMT_RATE}, fabric ${FABRIC_RATE}, ${REPEATS} repeat(s) (seconds: min / median / max)`,
            ...Object.entries(f)
                .filter(([k]) => !k.startsWith("bytes"))
                .map(([k, v]) => `  ${k.padEnd(24)} ${[v.min, v.median, v.max].map((x) => x.toFixed(1).padStart(7)).join(" ")}`),
            ...Object.entries(ratios).map(([k, v]) => `  ${k.padEnd(30)} ${v.toFixed(2)}`),
        ].join("\n"),
    );
}
const top = Math.max(...SIZES);

test(
    "image distribution: chain over the fabric and over management, and relay, to N hosts on shaped links; the raw streams",
    async () => {
        const values: Series = {};
        const want = await idOn(src);
        for (let i = 0; i < REPEATS; i++) {
            for (const n of SIZES) {
                // the slow paths (over the management network) at the ends of the range only
                const modes = [
                    ["chain", (k: number) => chain(k, "fabric")],
                    ["chain over management", (k: number) => chain(k, "management")],
                    ["relay", relay],
                ] as const;
                for (const [mode, run] of modes.filter(([m]) => m === "chain" || n === 1 || n === top)) {
                    await clear(dsts);
                    record(values, `${mode} N=${n}`, await run(n));
                    for (const h of dsts.slice(0, n)) expect(await idOn(h)).toBe(want);
                }
            }
            for (const network of ["fabric", "management"] as const) {
                const r = await raw(network);
                expect(r.bytes).toBeGreaterThan(MB << 20);
                record(values, `raw ssh cat over ${network}, 1 link`, r.seconds);
                record(values, "bytes", r.bytes);
            }
        }
        const { figures, med } = summarize(values);
        const ratios: Record<string, number> = {
            "fabric: raw / chain N=1": med("raw ssh cat over fabric, 1 link") / med("chain N=1"),
            [`chain N=${top} / chain N=1`]: med(`chain N=${top}`) / med("chain N=1"),
            "chain over management / over the fabric, N=1": med("chain over management N=1") / med("chain N=1"),
            [`relay N=${top} / relay N=1`]: med(`relay N=${top}`) / med("relay N=1"),
        };
        report.image = { imageMiB: MB, figures, ratios, when: new Date().toISOString() };
        print(`image distribution: ${MB} MiB image`, figures, ratios);
    },
    REPEATS * 1_800_000,
);

/**
 * (c) An image update: the bench image with one new layer of UPDATE_MB MiB (random bytes, added with docker cp and
 * docker commit on the source: the bench image has no shell to build with), copied to `top` targets that all hold
 * the bench image already, by the chain that sends only the missing layers and by the whole-image chain. Bytes on the
 * wire are the targets' fabric receive counters.
 */
test(
    "image update: only the layer the hosts lack travels (bytes on the wire and time, against the whole image)",
    async () => {
        const targets = dsts.slice(0, top);
        await on(
            src,
            `docker image inspect ${UPDATE_REF} >/dev/null 2>&1 || { d=$(mktemp -d) && head -c ${UPDATE_MB}M /dev/urandom >"$d/update" && ` +
                `c=$(docker create ${REF} /update) && docker cp "$d/update" "$c:/update" && docker commit "$c" ${UPDATE_REF} >/dev/null; ` +
                `rc=$?; docker rm "$c" >/dev/null 2>&1; rm -rf "$d"; exit $rc; }`,
            "making the update image",
        );
        const want = (await sh(imageInspectScript(target(src), UPDATE_REF), "inspect the update on the source")).trim();
        const layers = JSON.parse(
            await on(src, `docker image inspect --format '{{json .RootFS.Layers}}' ${UPDATE_REF}`, "update layers"),
        ) as string[];
        expect(layers.length).toBe(2);
        // the base on every target (whole, once)
        await chain(top);
        const values: Series = {};
        for (let i = 0; i < REPEATS; i++) {
            for (const mode of ["missing", "all"] as const) {
                await Promise.all(
                    targets.map((h) => on(h, `docker image rm --force ${UPDATE_REF} >/dev/null 2>&1; true`, `clearing ${h.name}`)),
                );
                const before = await fabricRx(targets);
                let outs: Record<string, unknown> = {};
                const seconds = await timed(async () => {
                    const members = targets.map((h) => member(h));
                    outs =
                        (
                            await imageChainProvider.create!({
                                ref: UPDATE_REF,
                                source: { kind: "host", node: src.name, target: target(src) },
                                members,
                                layers: mode,
                            })
                        ).outs ?? {};
                });
                const bytes = (await fabricRx(targets)) - before;
                expect(outs.copied).toEqual(targets.map((h) => h.name));
                expect(outs.sent).toBe(mode === "missing" ? "1 of 2 layers" : "whole image");
                // every host ends with the source's image ID
                for (const h of targets)
                    expect((await sh(imageInspectScript(target(h), UPDATE_REF), `inspect on ${h.name}`)).trim()).toBe(want);
                record(values, mode === "missing" ? "missing layers" : "whole image", seconds);
                record(values, mode === "missing" ? "bytes, missing layers" : "bytes, whole image", bytes);
            }
        }
        const { figures, med } = summarize(values);
        const layerBytes = UPDATE_MB << 20;
        const ratios = {
            "time: missing layers / whole image": med("missing layers") / med("whole image"),
            "bytes per host: missing layers / new layer": med("bytes, missing layers") / targets.length / layerBytes,
            "bytes: missing layers / whole image": med("bytes, missing layers") / med("bytes, whole image"),
        };
        report.update = { baseMiB: MB, layerMiB: UPDATE_MB, hosts: targets.length, figures, ratios, when: new Date().toISOString() };
        print(
            `image update: one new ${UPDATE_MB} MiB layer on a ${MB} MiB image every host holds, to ${targets.length} host(s)`,
            figures,
            ratios,
        );
        // the layer-aware copy carried the new layer and little else
        expect(ratios["bytes per host: missing layers / new layer"]).toBeLessThan(1.5);
    },
    REPEATS * 1_800_000,
);

/** Makes the bench model on spark-1 (once): weights as blobs behind relative symlinks, as a Hugging Face cache. */
async function makeModel(): Promise<void> {
    const shards = 4;
    const each = Math.max(1, Math.floor(MODEL_MB / shards));
    const blobs = path.join(MODEL_ROOT, "blobs");
    await on(
        src,
        // the marker names the size: a model left by a run of another size (the smoke's) is made anew
        `test -f ${MODEL_ROOT}/.complete-${shards}x${each}m || { rm -rf ${MODEL_ROOT} && mkdir -p ${blobs} ${MODEL_DIR} && cd ${MODEL_DIR} && ` +
            `for i in $(seq 1 ${shards}); do head -c ${each}M /dev/urandom >${blobs}/shard$i && ` +
            `ln -s ../../blobs/shard$i model-0000$i-of-0000${shards}.safetensors || exit 1; done && ` +
            `echo '{"model_type": "bench"}' >config.json && touch ${MODEL_ROOT}/.complete-${shards}x${each}m; }`,
        "making the bench model",
    );
}

async function clearModel(hs: TestbedHost[]): Promise<void> {
    await Promise.all(hs.map((h) => on(h, `rm -rf ${MODEL_ROOT}`, `clearing the model on ${h.name}`)));
}

test(
    "model distribution: the model chain to N hosts over the fabric, 1, 2 and 4 streams shaped and uncapped, and the raw stream",
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
        /** One model copy to the first n targets with `streams` streams per link, checked on every host. */
        const copy = async (label: string, n: number, streams: number) => {
            await clearModel(dsts);
            let outs: Record<string, unknown> = {};
            const inputs = { hostPath: MODEL_DIR, source: member(src), members: dsts.slice(0, n).map((h) => member(h)), streams };
            record(values, label, await timed(async () => (outs = (await modelChainProvider.create!(inputs)).outs ?? {})));
            digest = String(outs.digest);
            files = Number(outs.files);
            expect(digest).toMatch(/^sha256:|^[0-9a-f]{64}$/);
            expect(outs.copied).toEqual(dsts.slice(0, n).map((h) => h.name));
            for (const h of dsts.slice(0, n)) expect((outs.digests as Record<string, string>)[h.name]).toBe(digest);
            // a second run finds every member complete and sends nothing
            const again = (await modelChainProvider.create!(inputs)).outs ?? {};
            expect(again.copied).toEqual([]);
        };
        for (let i = 0; i < REPEATS; i++) {
            for (const n of SIZES) await copy(`chain N=${n}`, n, DEFAULT_STREAMS);
            for (const k of STREAMS) await copy(`${k} stream(s), N=1`, 1, k);
            let out = "";
            record(
                values,
                "raw ssh tar over fabric, 1 link",
                await timed(async () => {
                    // in the source host's own session: the model is in its own directory (<state>/own), which only
                    // its sessions see; the bytes go from it to the target over the fabric
                    out = await on(
                        src,
                        `set -o pipefail; tar -C ${MODEL_DIR} -chf - . | ${fabricSsh(dsts[0], "wc -c")}`,
                        "raw model stream",
                    );
                }),
            );
            // the raw stream carried the whole model (a tar of it is a little larger)
            expect(Number(out.trim())).toBeGreaterThan(MODEL_MB << 20);
            record(values, "bytes", Number(out.trim()));
            if (UNCAPPED) {
                await shape("off", "off");
                for (const k of STREAMS) await copy(`${k} stream(s), N=1, uncapped`, 1, k);
                await shape(MGMT_RATE, FABRIC_RATE);
            }
        }
        await clearModel(dsts);
        const { figures, med } = summarize(values);
        const ratios: Record<string, number> = {
            [`chain N=${top} / chain N=1`]: med(`chain N=${top}`) / med("chain N=1"),
            "fabric: raw / chain N=1": med("raw ssh tar over fabric, 1 link") / med("chain N=1"),
            ...Object.fromEntries(
                STREAMS.filter((k) => k !== 1).flatMap((k) => [
                    [`${k} streams / 1, shaped`, med(`${k} stream(s), N=1`) / med("1 stream(s), N=1")],
                    ...(UNCAPPED
                        ? [[`${k} streams / 1, uncapped`, med(`${k} stream(s), N=1, uncapped`) / med("1 stream(s), N=1, uncapped")]]
                        : []),
                ]),
            ),
        };
        report.model = { modelMiB: MODEL_MB, files, digest, streams: DEFAULT_STREAMS, figures, ratios, when: new Date().toISOString() };
        print(`model distribution: ${MODEL_MB} MiB in ${files} files (weights behind symlinks)`, figures, ratios);
    },
    REPEATS * 1_800_000,
);

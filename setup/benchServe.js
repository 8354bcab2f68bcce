#!/usr/bin/env node
// @ts-check
/**
 * npm run bench:serve -- --stack NAME [--protocol standard|smoke] [--out FILE] [--compare FILE] [--cwd DIR]
 *
 * A serving benchmark of the stack's cluster under a fixed, recorded protocol (setup/benchServeModel.js;
 * docs/benchmark.md): vLLM's own `vllm bench serve` code, from the image the serve container runs, on the head host
 * (infra/scripts/bench_serve.sh over the stack's own ssh key and known_hosts), against the API with the stack's key
 * and, with TLS, the stack's own certificate as the only trust. Writes the result as JSON (the protocol, the stack's
 * cluster fingerprint, the image's ID and vLLM version, each level's rates and latency percentiles) and a plot (SVG)
 * beside it, prints a table, and with --compare the ratios against a previous result of the same protocol.
 */
"use strict";
const { spawn, spawnSync } = require("child_process");
const fs = require("fs");
const path = require("path");
const m = require("./benchServeModel");

/** The program's TypeScript modules, loaded once the arguments are good (a bad argument is refused at once). */
function hostParts() {
    require("./tsRequire").register();
    return { ...require("./statusRun"), ...require("../infra/builders/bench") };
}

const USAGE = `usage: npm run bench:serve -- --stack NAME [--protocol standard|smoke] [--out FILE] [--compare FILE]

  --stack NAME      the stack to measure (its outputs say where; its API key is read with pulumi stack output,
                    so the stack's passphrase must be in the environment, as for pulumi up)
  --protocol P      standard (default: the protocol to compare boxes with) or smoke (tiny sizes, for the simulated
                    hosts); docs/benchmark.md writes both down
  --out FILE        the result file (default .state/bench/serve-STACK-TIME.json); the plot is FILE with .svg
  --compare FILE    a previous result of the same protocol: prints the ratios (refused under another protocol)
  --timeout S       the longest the whole benchmark may take, seconds (default 3600; smoke 900)
  --cwd DIR         the Pulumi project directory (default: the current one)`;

/** @param {string[]} argv */
function parseArgs(argv) {
    /** @type {{ stack?: string, protocol: string, out?: string, compare?: string, cwd?: string, timeout?: number }} */
    const o = { protocol: "standard" };
    for (let i = 0; i < argv.length; i++) {
        const a = argv[i];
        const value = () => {
            const v = argv[++i];
            if (v === undefined) throw new m.BenchError(`${a} needs a value\n\n${USAGE}`);
            return v;
        };
        if (a === "--stack") o.stack = value();
        else if (a === "--protocol") o.protocol = value();
        else if (a === "--out") o.out = value();
        else if (a === "--compare") o.compare = value();
        else if (a === "--cwd") o.cwd = value();
        else if (a === "--timeout") {
            const v = value();
            if (!/^\d+$/.test(v) || Number(v) < 10 || Number(v) > 86400)
                throw new m.BenchError(`--timeout ${v}: expected seconds, 10 to 86400`);
            o.timeout = Number(v);
        } else if (a === "-h" || a === "--help") {
            console.log(USAGE);
            process.exit(0);
        } else throw new m.BenchError(`unknown argument ${a}\n\n${USAGE}`);
    }
    if (o.stack === undefined) throw new m.BenchError(`--stack is required\n\n${USAGE}`);
    if (!/^[A-Za-z0-9_.\/-]+$/.test(o.stack)) throw new m.BenchError(`--stack ${o.stack}: not a stack name`);
    m.protocolOf(o.protocol);
    return o;
}

/** The stack's API key, from the CLI (the passphrase from the environment); never printed. @param {{ stack?: string, cwd?: string }} o */
function apiKey(o) {
    const args = ["stack", "output", "apiKey", "--show-secrets", "--stack", String(o.stack), ...(o.cwd ? ["--cwd", o.cwd] : [])];
    const r = spawnSync("pulumi", args, { encoding: "utf8", env: process.env, timeout: 120_000, stdio: ["ignore", "pipe", "pipe"] });
    if (r.error) throw new m.BenchError(`cannot read the stack's API key: ${r.error.message}`);
    const key = r.stdout.trim();
    if (r.status !== 0 || key === "" || /\s/.test(key)) {
        const said = (r.stderr.trim().split("\n").pop() ?? "").slice(0, 300);
        throw new m.BenchError(
            `cannot read the stack's API key with pulumi stack output apiKey --show-secrets (exit ${r.status}): ${said || "no key"}; ` +
                "the stack's passphrase must be in the environment (PULUMI_CONFIG_PASSPHRASE or _FILE; for the demo: source .state/demo.env)",
        );
    }
    return key;
}

/** UTC time as a file name part: 20261207T201500Z. @param {Date} d */
const stamp = (d) =>
    d
        .toISOString()
        .replace(/[-:]/g, "")
        .replace(/\.\d+Z$/, "Z");

/**
 * Runs the benchmark's command line with the key and the plan on its stdin; vLLM's progress passes through to stderr
 * (with the key, should it ever appear, blotted out). Resolves with stdout.
 * @param {string} cmd @param {string} input @param {string} key @param {number} timeoutMs
 * @param {(err: string, what: string) => string} sshWords
 */
function run(cmd, input, key, timeoutMs, sshWords) {
    return new Promise((resolve, reject) => {
        const child = spawn("bash", ["-c", cmd], { detached: true, env: process.env, stdio: ["pipe", "pipe", "pipe"] });
        const stop = () => {
            try {
                if (child.pid) process.kill(-child.pid, "SIGTERM");
            } catch {
                // gone
            }
        };
        for (const sig of /** @type {NodeJS.Signals[]} */ (["SIGINT", "SIGTERM", "SIGHUP"]))
            process.on(sig, () => (stop(), process.exit(130)));
        let out = "";
        let err = "";
        let partial = "";
        child.stdout.on("data", (d) => (out = (out + d).slice(-1024 * 1024)));
        child.stderr.on("data", (d) => {
            // a progress bar redraws its line with carriage returns: each redraw is a line here, the blank ones dropped
            const text = partial + d.toString();
            const lines = text.split(/\r\n|\r|\n/);
            partial = lines.pop() ?? "";
            for (const l of lines.filter((x) => x.trim() !== "")) {
                const shown = m.printable(l.split(key).join("(the API key)"));
                err = (err + shown + "\n").slice(-8192);
                process.stderr.write(`  | ${shown}\n`);
            }
        });
        const timer = setTimeout(() => {
            stop();
            reject(new m.BenchError(`no result within ${timeoutMs / 1000} s (--timeout); the benchmark on the head was stopped`));
        }, timeoutMs);
        child.on("error", (e) => reject(new m.BenchError(`cannot run bash: ${e.message}`)));
        child.on("close", (code) => {
            clearTimeout(timer);
            if (code === 255) reject(new m.BenchError(sshWords(err, "bench:serve") || "ssh to the head failed"));
            else resolve({ code, stdout: out, stderr: err });
        });
        child.stdin.on("error", () => undefined);
        child.stdin.end(input);
    });
}

async function main() {
    const o = parseArgs(process.argv.slice(2));
    const protocol = m.protocolOf(o.protocol);
    const { StatusError, readOutputs, sshWords, benchServeCommand, benchBaseUrl, BENCH_TOKENIZER } = hostParts();
    let outputs;
    try {
        outputs = readOutputs(o);
    } catch (e) {
        if (e instanceof StatusError) throw new m.BenchError(e.message);
        throw e;
    }
    const spec = outputs.status;
    /** @type {import("./benchServeModel").BenchResult | undefined} */
    let before;
    if (o.compare !== undefined) {
        let text;
        try {
            text = fs.readFileSync(o.compare, "utf8");
        } catch (e) {
            throw new m.BenchError(`--compare ${o.compare}: cannot be read (${/** @type {NodeJS.ErrnoException} */ (e).code})`);
        }
        before = m.readPrevious(text, o.compare, protocol);
    }
    const key = apiKey(o);
    const baseUrl = benchBaseUrl(spec);
    const plan = m.planOf(protocol, baseUrl, spec.servedModelName, BENCH_TOKENIZER);
    const head = spec.nodes.find((n) => n.role === "head");
    console.error(
        `bench:serve: stack ${spec.stack}, protocol ${protocol.name} v${protocol.version} (${protocol.levels.map((l) => `${l.prompts} at concurrency ${l.concurrency}`).join(", ")}), ` +
            `vLLM's bench serve in the serve image on ${head?.name ?? "the head"} against ${baseUrl}`,
    );
    const t0 = Date.now();
    const timeoutMs = (o.timeout ?? (protocol.name === "smoke" ? 900 : 3600)) * 1000;
    const r = /** @type {{ code: number | null, stdout: string, stderr: string }} */ (
        await run(benchServeCommand(spec), `${key}\n${JSON.stringify(plan)}\n`, key, timeoutMs, sshWords)
    );
    let answer;
    try {
        answer = m.parseAnswer(r.stdout, protocol);
    } catch (e) {
        if (r.code !== 0 && !r.stdout.includes("\n{"))
            throw new m.BenchError(`the benchmark could not run (exit ${r.code}): ${r.stderr.trim().split("\n").pop() ?? ""}`);
        throw e;
    }
    const seconds = (Date.now() - t0) / 1000;
    /** @type {import("./benchServeModel").BenchResult} */
    const result = {
        kind: "vllm-cluster serving benchmark",
        formatVersion: 1,
        time: new Date().toISOString(),
        seconds: Math.round(seconds * 10) / 10,
        protocol,
        stack: spec.stack,
        cluster: spec.cluster,
        backend: spec.backend,
        hosts: spec.nodes.length,
        servedModelName: spec.servedModelName,
        clusterFingerprint: typeof outputs.clusterFingerprint === "string" ? outputs.clusterFingerprint : "unknown",
        endpoint: `${baseUrl}/v1`,
        image: { id: answer.image, vllm: answer.vllm },
        levels: answer.levels,
    };
    const file = o.out ?? path.join(o.cwd ?? ".", ".state", "bench", `serve-${spec.stack.replace(/\//g, "_")}-${stamp(new Date())}.json`);
    fs.mkdirSync(path.dirname(file), { recursive: true });
    fs.writeFileSync(file, JSON.stringify(result, null, 2) + "\n");
    const svg = file.replace(/\.json$/, "") + ".svg";
    fs.writeFileSync(svg, m.plotSvg(result, before));
    console.log(m.renderTable(result));
    if (before !== undefined) console.log(m.renderComparison(m.compare(result, before), before, String(o.compare)));
    console.log(`result: ${file}\nplot:   ${svg}\n(${seconds.toFixed(0)} s)`);
}

main().catch((e) => {
    if (e instanceof m.BenchError) {
        console.error(`bench:serve: ${e.message}`);
        process.exit(2);
    }
    console.error(e);
    process.exit(1);
});

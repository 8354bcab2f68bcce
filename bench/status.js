#!/usr/bin/env node
// @ts-check
/**
 * npm run bench:status -- --stack NAME [--cwd DIR] [--refreshes N] [--out FILE]
 *
 * How long a whole refresh of the status view takes (setup/statusRun.js: every host asked at once, one ssh session
 * each), against a deployed stack: N refreshes back to back in one process, as --watch makes them (the first opens
 * each host's connection, the others run inside it), and one `npm run status -- --json` from a fresh process. On
 * the simulated hosts (their sshd logs readable under $VCL_TESTBED_DIR) it also counts the connections and sessions
 * each host's sshd accepted. Prints the figures; writes them as JSON to --out, or $VCL_RESULTS_DIR/bench/status.json.
 *
 *   npm run demo && source .state/demo.env && npm run bench:status -- --stack local
 */
"use strict";
const { spawnSync } = require("child_process");
const fs = require("fs");
const path = require("path");
const { StatusError, readOutputs, refresh } = require("../setup/statusRun");

const USAGE = "usage: npm run bench:status -- --stack NAME [--cwd DIR] [--refreshes N] [--out FILE]";
const TESTBED = process.env.VCL_TESTBED_DIR ?? "/var/lib/vllm-cluster-testbed";

/** @param {number[]} xs @param {number} q the nearest-rank quantile */
function quantile(xs, q) {
    const s = [...xs].sort((a, b) => a - b);
    return s[Math.max(0, Math.ceil(q * s.length) - 1)];
}

/** @param {number} x */
const r3 = (x) => Math.round(x * 1000) / 1000;

/** Where each host's sshd log stands now (the simulated hosts'), or undefined when one cannot be read. @param {string[]} nodes */
function sshdMarks(nodes) {
    const logs = nodes.map((n) => path.join(TESTBED, "hosts", n, "sshd.log"));
    if (!logs.every((f) => fs.existsSync(f))) return undefined;
    return Object.fromEntries(nodes.map((n, i) => [n, { file: logs[i], from: fs.statSync(logs[i]).size }]));
}

/** Connections (Accepted publickey) and sessions each host's sshd logged since `marks`. @param {NonNullable<ReturnType<typeof sshdMarks>>} marks */
function sshdSince(marks) {
    return Object.fromEntries(
        Object.entries(marks).map(([n, m]) => {
            const log = fs.readFileSync(m.file).subarray(m.from).toString("utf8");
            return [
                n,
                {
                    connections: (log.match(/^Accepted publickey/gm) ?? []).length,
                    sessions: (log.match(/^Starting session: /gm) ?? []).length,
                },
            ];
        }),
    );
}

/**
 * N refreshes back to back in this process; each must reach every host.
 * @param {import("../setup/statusModel").Outputs} outputs @param {{ refreshes: number, timeoutMs?: number }} o
 */
async function measure(outputs, o) {
    const nodes = outputs.status.nodes.map((n) => n.name);
    const marks = sshdMarks(nodes);
    /** @type {number[]} */
    const seconds = [];
    /** @type {Record<string, number[]>} */
    const perHost = Object.fromEntries(nodes.map((n) => [n, []]));
    /** @type {import("../setup/statusModel").Memory} */
    let memory = {};
    for (let i = 0; i < o.refreshes; i++) {
        const r = await refresh(outputs, { timeoutMs: o.timeoutMs ?? 10_000, memory });
        memory = r.memory;
        const failed = r.snapshot.hosts.filter((h) => h.error !== null);
        if (failed.length) throw new StatusError(`refresh ${i + 1}: ${failed.map((h) => `${h.node}: ${h.error}`).join("; ")}`);
        seconds.push(r.seconds);
        for (const h of r.snapshot.hosts) perHost[h.node].push(h.seconds);
    }
    const warm = seconds.slice(1);
    return {
        refreshes: o.refreshes,
        hosts: nodes.length,
        firstSeconds: r3(seconds[0]),
        medianSeconds: r3(quantile(warm.length ? warm : seconds, 0.5)),
        p90Seconds: r3(quantile(warm.length ? warm : seconds, 0.9)),
        maxSeconds: r3(Math.max(...seconds)),
        hostMedianSeconds: Object.fromEntries(Object.entries(perHost).map(([n, xs]) => [n, r3(quantile(xs, 0.5))])),
        sshd: marks ? sshdSince(marks) : null,
    };
}

/** One `npm run status -- --json` from a fresh process: node's start, the outputs, one refresh with new connections. @param {{ stack: string, cwd?: string }} o */
function oneShot(o) {
    const t0 = Date.now();
    const args = [path.join(__dirname, "..", "setup", "status.js"), "--stack", o.stack, "--json", ...(o.cwd ? ["--cwd", o.cwd] : [])];
    const r = spawnSync(process.execPath, args, { encoding: "utf8", env: process.env, timeout: 120_000 });
    if (r.status !== 0) throw new StatusError(`npm run status -- --json: exit ${r.status}: ${r.stderr.trim()}`);
    return r3((Date.now() - t0) / 1000);
}

/** @param {string[]} argv */
function parseArgs(argv) {
    /** @type {{ stack?: string, cwd?: string, refreshes: number, out?: string }} */
    const o = { refreshes: 20 };
    for (let i = 0; i < argv.length; i++) {
        const v = argv[i + 1];
        if (v === undefined) throw new StatusError(`${argv[i]} needs a value\n${USAGE}`);
        if (argv[i] === "--stack") o.stack = v;
        else if (argv[i] === "--cwd") o.cwd = v;
        else if (argv[i] === "--out") o.out = v;
        else if (argv[i] === "--refreshes" && /^\d{1,4}$/.test(v) && Number(v) >= 2) o.refreshes = Number(v);
        else throw new StatusError(`${argv[i]} ${v}: not understood\n${USAGE}`);
        i++;
    }
    if (!o.stack) throw new StatusError(`--stack is required\n${USAGE}`);
    return /** @type {{ stack: string, cwd?: string, refreshes: number, out?: string }} */ (o);
}

async function main() {
    const o = parseArgs(process.argv.slice(2));
    const outputs = readOutputs(o);
    const m = await measure(outputs, { refreshes: o.refreshes });
    const result = { stack: o.stack, time: new Date().toISOString(), ...m, oneShotSeconds: oneShot(o) };
    const hosts = Object.entries(m.hostMedianSeconds).map(([n, s]) => `${n} ${s} s`);
    console.log(`status refresh of ${m.hosts} hosts, ${m.refreshes} back to back in one process (the first connects):`);
    console.log(`  first ${m.firstSeconds} s; the others: median ${m.medianSeconds} s, p90 ${m.p90Seconds} s; slowest ${m.maxSeconds} s`);
    console.log(`  each host's answer, median: ${hosts.join(", ")}`);
    if (m.sshd) {
        const c = Object.entries(m.sshd).map(([n, t]) => `${n} ${t.connections} connection(s), ${t.sessions} sessions`);
        console.log(`  accepted by each host's sshd over the ${m.refreshes} refreshes: ${c.join("; ")}`);
    } else {
        console.log(`  connections not counted: no sshd log under ${TESTBED}/hosts (one session per host and refresh, by construction)`);
    }
    console.log(`  npm run status -- --json from a fresh process (node, the outputs, new connections): ${result.oneShotSeconds} s`);
    const out = o.out ?? (process.env.VCL_RESULTS_DIR ? path.join(process.env.VCL_RESULTS_DIR, "bench", "status.json") : undefined);
    if (out) {
        fs.mkdirSync(path.dirname(out), { recursive: true });
        fs.writeFileSync(out, JSON.stringify(result, null, 2) + "\n");
        console.log(`  written to ${out}`);
    }
}

if (require.main === module) {
    main().catch((e) => {
        console.error(`bench:status: ${e instanceof StatusError ? e.message : e instanceof Error ? e.stack : String(e)}`);
        process.exit(e instanceof StatusError ? 2 : 1);
    });
}

module.exports = { measure, quantile };

#!/usr/bin/env node
/**
 * Where the suite's time went, per test file on the simulated hosts: jest's wall time for the file, and from the
 * file's ledger (tests/lib/ledger.ts) the seconds in each kind of work: engine operations, the engine's waits for
 * vLLM and for Ray, the tests' own polling and sleeps, commands on the hosts.
 *
 *   node tests/lib/timings-report.js [RESULTS_DIR] [JEST_JSON...]     (default $VCL_RESULTS_DIR)
 *   node tests/lib/timings-report.js --json [RESULTS_DIR] ...          the same as one JSON object
 *
 * Every jest JSON report (--json --outputFile) in RESULTS_DIR, and any given, is read for the files' wall times.
 */
"use strict";
const fs = require("fs");
const path = require("path");

const ROOT = path.join(__dirname, "..", "..");

/**
 * A test file's path inside the checkout that ran it ("tests/..."): a results directory may come from another clone
 * (CI's), whose absolute paths are not this one's.
 */
function repoPath(name) {
    const m = /(?:^|\/)(tests\/.+)$/.exec(name);
    return m ? m[1] : path.relative(ROOT, name);
}

/** Per file: wall seconds from jest's reports. */
function wallTimes(reports) {
    const out = {};
    for (const f of reports) {
        let r;
        try {
            r = JSON.parse(fs.readFileSync(f, "utf8"));
        } catch {
            continue;
        }
        for (const t of r.testResults ?? []) {
            const file = repoPath(t.name ?? t.testFilePath ?? "");
            const start = t.startTime ?? t.perfStats?.start;
            const end = t.endTime ?? t.perfStats?.end;
            if (file && start && end) out[file] = (out[file] ?? 0) + (end - start) / 1000;
        }
    }
    return out;
}

function ledgers(dir) {
    const out = {};
    const d = path.join(dir, "timings");
    for (const f of fs.existsSync(d) ? fs.readdirSync(d) : []) {
        try {
            const { file, ledger } = JSON.parse(fs.readFileSync(path.join(d, f), "utf8"));
            out[file] = ledger;
        } catch {
            // a ledger being written while this reads: skip it
        }
    }
    return out;
}

function main(argv) {
    const json = argv[0] === "--json";
    const args = json ? argv.slice(1) : argv;
    const dir = args[0] ?? process.env.VCL_RESULTS_DIR ?? path.join(process.env.TMPDIR ?? "/tmp", "vllm-cluster-results");
    // jest's reports: the stages' (integration-*.json, unit.json) and the fault suite's (faults/jest.json)
    const reports = [
        ...(fs.existsSync(dir)
            ? fs
                  .readdirSync(dir)
                  .filter((f) => f.endsWith(".json"))
                  .map((f) => path.join(dir, f))
            : []),
        ...[path.join(dir, "faults", "jest.json")].filter((f) => fs.existsSync(f)),
        ...args.slice(1),
    ];
    const wall = wallTimes(reports);
    const led = ledgers(dir);
    const files = [...new Set([...Object.keys(wall), ...Object.keys(led)])].filter((f) => f !== "unknown").sort();
    if (json) {
        console.log(JSON.stringify(Object.fromEntries(files.map((f) => [f, { wallSeconds: wall[f], ledger: led[f] ?? {} }])), null, 2));
        return;
    }
    const kinds = [...new Set(files.flatMap((f) => Object.keys(led[f] ?? {})))];
    const s = (x) => (x === undefined ? "" : `${Math.round(x)}`);
    console.log(`| file | wall s | ${kinds.join(" | ")} |`);
    console.log(`| --- | --- | ${kinds.map(() => "---").join(" | ")} |`);
    for (const f of files) {
        const l = led[f] ?? {};
        const cells = kinds.map((k) => (l[k] ? `${s(l[k].seconds)} (${l[k].count})` : ""));
        console.log(`| ${f} | ${s(wall[f])} | ${cells.join(" | ")} |`);
    }
    console.log("\n(seconds (count); kinds overlap: a readiness wait is inside a pulumi up)");
}

main(process.argv.slice(2));

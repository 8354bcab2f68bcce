#!/usr/bin/env node
/**
 * The README's Faults table, generated from the fault suite's own results.
 *
 *   node tests/faults/report.js ROWS JEST_JSON   the rows the suite recorded ($VCL_FAULTS_RESULTS) and jest's JSON
 *                                                report of the same run: writes tests/faults/results.json and the
 *                                                table in README.md (tests/faults/run.sh runs it after the suite)
 *   node tests/faults/report.js                  rewrites the README's table from the committed results.json only
 */
"use strict";
const fs = require("fs");
const path = require("path");
const { block, cell, markers, write } = require("../lib/readmeBlock");

const RESULTS = path.join(__dirname, "results.json");
const MARKERS = markers("faults-table", "tests/faults/report.js", "tests/faults/results.json");

/** The block: how many of the suite's tests passed in the run, then one row per fault. */
function render(results) {
    const t = results.tests;
    const verdict =
        t.failed === 0 && t.passed === t.total ? `**${t.passed} of ${t.total} passed**` : `**${t.failed} of ${t.total} failed**`;
    return block(MARKERS, [
        `Last run: ${results.generated}, ${verdict} (\`tests/faults/results.json\`).`,
        "",
        "| Fault | Expected | Observed | s |",
        "| --- | --- | --- | --- |",
        ...results.rows.map((r) => `| ${cell(r.fault)} | ${cell(r.expected)} | ${cell(r.observed)} | ${r.seconds} |`),
    ]);
}

/** results.json from the rows and jest's report: counts of the suite's tests. */
function collect(rows, report) {
    const all = (report.testResults ?? []).flatMap((f) => f.assertionResults ?? []);
    return {
        generated: new Date().toISOString().slice(0, 10),
        tests: {
            total: all.length,
            passed: all.filter((a) => a.status === "passed").length,
            failed: all.filter((a) => a.status === "failed").length,
        },
        rows,
    };
}

function main(argv) {
    if (argv.length === 2) {
        const rows = JSON.parse(fs.readFileSync(argv[0], "utf8"));
        const results = collect(rows, JSON.parse(fs.readFileSync(argv[1], "utf8")));
        fs.writeFileSync(RESULTS, JSON.stringify(results, null, 2) + "\n");
    } else if (argv.length !== 0) {
        console.error("usage: node tests/faults/report.js [ROWS_JSON JEST_JSON]");
        return 2;
    }
    const results = JSON.parse(fs.readFileSync(RESULTS, "utf8"));
    write([[MARKERS, render(results)]]);
    console.log(render(results).split("\n").slice(3, -3).join("\n"));
    return 0;
}

module.exports = { render, collect, MARKERS };
if (require.main === module) process.exitCode = main(process.argv.slice(2));

#!/usr/bin/env node
// @ts-check
/**
 * The Faults table of docs/faults.md, generated from the fault suite's own results.
 *
 *   node tests/faults/report.js ROWS JEST_JSON OUT   the rows the suite recorded ($VCL_FAULTS_RESULTS) and jest's JSON
 *                                                    report of the same run: writes the run's results to OUT and
 *                                                    prints the table (tests/faults/run.sh runs it after the suite)
 *
 * The page's table is rendered from the committed tests/faults/results.json by `npm run docs`; a run's OUT becomes
 * that file with `npm run docs -- --accept DIR`.
 */
"use strict";
const fs = require("fs");
const path = require("path");
const { block, cell, markers } = require("../lib/docBlock");

const RESULTS = path.join(__dirname, "results.json");
const PAGE = "docs/faults.md";
const MARKERS = markers("faults-table", "tests/faults/report.js", "tests/faults/results.json");

/**
 * @typedef {{ fault: string, expected: string, observed: string, seconds: number }} Row
 * @typedef {{ generated: string, tests: { total: number, passed: number, failed: number }, rows: Row[] }} Results
 */

/** The block: how many of the suite's tests passed in the run, then one row per fault. @param {Results} results */
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

/**
 * The run's results from the rows and jest's report: counts of the suite's tests.
 * @param {Row[]} rows @param {{ testResults?: { assertionResults?: { status: string }[] }[] }} report @returns {Results}
 */
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

/** The block this generator owns, from the committed results (setup/docs.js). */
function blocks() {
    return [{ page: PAGE, markers: MARKERS, text: render(JSON.parse(fs.readFileSync(RESULTS, "utf8"))) }];
}

/** @param {string[]} argv */
function main(argv) {
    if (argv.length !== 3) {
        console.error("usage: node tests/faults/report.js ROWS_JSON JEST_JSON OUT_JSON");
        return 2;
    }
    const results = collect(JSON.parse(fs.readFileSync(argv[0], "utf8")), JSON.parse(fs.readFileSync(argv[1], "utf8")));
    fs.mkdirSync(path.dirname(argv[2]), { recursive: true });
    fs.writeFileSync(argv[2], JSON.stringify(results, null, 2) + "\n");
    console.log(render(results).split("\n").slice(3, -3).join("\n"));
    return 0;
}

module.exports = { render, collect, blocks, MARKERS, PAGE };
if (require.main === module) process.exitCode = main(process.argv.slice(2));

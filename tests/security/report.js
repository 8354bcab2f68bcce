#!/usr/bin/env node
// @ts-check
/**
 * The Security table of docs/security.md, generated from the tests' own results.
 *
 *   node tests/security/report.js RESULTS_DIR   reads the jest JSON reports in RESULTS_DIR (the unit, policy and
 *                                               integration runs write them) and writes the run's results to
 *                                               RESULTS_DIR/security/results.json (never into the tree)
 *
 * The page's table is rendered from the committed tests/security/results.json by `npm run docs`; a run's results
 * become that file with `npm run docs -- --accept RESULTS_DIR`.
 *
 * tests/security/threats.json lists each threat, its defense and the tests that show it (a test file and a name that
 * the test's full name contains). A threat's last result is "passed" only when every named test ran and passed; a
 * named test that matches nothing is an error, so a renamed test cannot silently drop out of the table.
 */
"use strict";
const fs = require("fs");
const path = require("path");

const THREATS = path.join(__dirname, "threats.json");
const RESULTS = path.join(__dirname, "results.json");
const PAGE = "docs/security.md";
const { block, cell, markers } = require("../lib/docBlock");

const MARKERS = markers("security-table", "tests/security/report.js", "tests/security/results.json");

/**
 * @typedef {{ file: string, name: string }} TestRef
 * @typedef {{ threat: string, defense: string, tests: TestRef[] }} Threat
 * @typedef {{ file: string, name: string, status: string }} Assertion
 * @typedef {{ threat: string, defense: string, tests: (TestRef & { assertions: number, status: string })[], status: string }} Row
 * @typedef {{ generated: string, passed: number, rows: Row[] }} Results
 */

/** The assertions of jest JSON reports: file (its path in the report), full name, status. @param {string} dir */
function assertions(dir) {
    /** @type {Assertion[]} */
    const out = [];
    for (const f of fs.readdirSync(dir).filter((x) => x.endsWith(".json"))) {
        const report = JSON.parse(fs.readFileSync(path.join(dir, f), "utf8"));
        for (const file of report.testResults ?? []) {
            // the path as the report has it (absolute, in whichever clone ran the tests), with forward slashes
            const abs = file.name.split(path.sep).join("/");
            for (const a of file.assertionResults ?? []) out.push({ file: abs, name: a.fullName, status: a.status });
        }
    }
    return out;
}

/**
 * Each threat with the results of its tests and its own: passed, failed, or not run.
 * @param {Threat[]} threats @param {Assertion[]} seen @returns {Row[]}
 */
function evaluate(threats, seen) {
    return threats.map((t) => {
        const tests = t.tests.map((ref) => {
            // a report's paths are absolute in the clone that ran it: the named file is their repository-relative tail
            const hits = seen.filter((a) => (a.file === ref.file || a.file.endsWith(`/${ref.file}`)) && a.name.includes(ref.name));
            const status =
                hits.length === 0
                    ? "not run"
                    : hits.some((a) => a.status === "failed")
                      ? "failed"
                      : hits.every((a) => a.status === "passed")
                        ? "passed"
                        : "not run";
            return { ...ref, assertions: hits.length, status };
        });
        const status = tests.some((x) => x.status === "failed")
            ? "failed"
            : tests.every((x) => x.status === "passed")
              ? "passed"
              : "not run";
        return { threat: t.threat, defense: t.defense, tests, status };
    });
}

/** The Markdown table of results.json, between the page's markers. @param {Results} results */
function render(results) {
    const rows = results.rows.map((r) => {
        const shown = r.tests.map((t) => `\`${t.file}\`: ${t.name} (${t.assertions} ${t.assertions === 1 ? "test" : "tests"})`).join("; ");
        const last = r.status === "passed" ? "passed" : `**${r.status}**`;
        return `| ${cell(r.threat)} | ${cell(r.defense)} | ${cell(shown)} | ${last} |`;
    });
    return block(MARKERS, [
        `Last results: the run of ${results.generated} (${results.passed} of ${results.rows.length} threats shown passing).`,
        "",
        "| Threat | Defense | Shown by | Last result |",
        "| --- | --- | --- | --- |",
        ...rows,
    ]);
}

/** The block this generator owns, from the committed results (setup/docs.js). */
function blocks() {
    return [{ page: PAGE, markers: MARKERS, text: render(JSON.parse(fs.readFileSync(RESULTS, "utf8"))) }];
}

/** @param {string[]} argv */
function main(argv) {
    const dir = argv[0];
    if (argv.length !== 1 || !fs.existsSync(dir)) {
        console.error("usage: node tests/security/report.js RESULTS_DIR");
        return 2;
    }
    const threats = JSON.parse(fs.readFileSync(THREATS, "utf8"));
    const rows = evaluate(threats, assertions(dir));
    const unmatched = rows.flatMap((r) => r.tests.filter((t) => t.assertions === 0).map((t) => `${t.file}: ${t.name}`));
    const results = { generated: new Date().toISOString().slice(0, 10), passed: rows.filter((r) => r.status === "passed").length, rows };
    fs.mkdirSync(path.join(dir, "security"), { recursive: true });
    fs.writeFileSync(path.join(dir, "security", "results.json"), JSON.stringify(results, null, 2) + "\n");
    for (const r of rows) console.log(`${r.status.padEnd(8)} ${r.threat.slice(0, 100)}`);
    if (unmatched.length > 0) {
        console.error(`security table: no result for ${unmatched.length} named test(s):\n  ${unmatched.join("\n  ")}`);
        return 1;
    }
    return rows.every((r) => r.status === "passed") ? 0 : 1;
}

module.exports = { evaluate, render, blocks, MARKERS, PAGE };
if (require.main === module) process.exitCode = main(process.argv.slice(2));

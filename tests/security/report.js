#!/usr/bin/env node
/**
 * The README's Security table, generated from the tests' own results.
 *
 *   node tests/security/report.js RESULTS_DIR   reads the jest JSON reports in RESULTS_DIR (the unit, policy and
 *                                               integration runs write them), writes tests/security/results.json
 *                                               and the table in README.md
 *   node tests/security/report.js --render      rewrites the README's table from the committed results.json only
 *
 * tests/security/threats.json lists each threat, its defense and the tests that show it (a test file and a name that
 * the test's full name contains). A threat's last result is "passed" only when every named test ran and passed; a
 * named test that matches nothing is an error, so a renamed test cannot silently drop out of the table.
 */
"use strict";
const fs = require("fs");
const path = require("path");

const ROOT = path.join(__dirname, "..", "..");
const THREATS = path.join(__dirname, "threats.json");
const RESULTS = path.join(__dirname, "results.json");
const README = path.join(ROOT, "README.md");
const { cell, markers, replace } = require("../lib/readmeBlock");

const { start: START, end: END } = markers("security-table", "tests/security/report.js", "tests/security/results.json");

/** The assertions of jest JSON reports: file (its path in the report), full name, status. */
function assertions(dir) {
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

/** Each threat with the results of its tests and its own: passed, failed, or not run. */
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

/** The Markdown table of results.json, between the README's markers. */
function render(results) {
    const rows = results.rows.map((r) => {
        const shown = r.tests.map((t) => `\`${t.file}\`: ${t.name} (${t.assertions} ${t.assertions === 1 ? "test" : "tests"})`).join("; ");
        const last = r.status === "passed" ? "passed" : `**${r.status}**`;
        return `| ${cell(r.threat)} | ${cell(r.defense)} | ${cell(shown)} | ${last} |`;
    });
    return [
        START,
        "",
        `Last results: the run of ${results.generated} (${results.passed} of ${results.rows.length} threats shown passing).`,
        "",
        "| Threat | Defense | Shown by | Last result |",
        "| --- | --- | --- | --- |",
        ...rows,
        "",
        END,
    ].join("\n");
}

/** README.md with its Security table replaced. */
function withTable(readme, table) {
    return replace(readme, { start: START, end: END }, table);
}

function main(argv) {
    if (argv[0] === "--render") {
        fs.writeFileSync(README, withTable(fs.readFileSync(README, "utf8"), render(JSON.parse(fs.readFileSync(RESULTS, "utf8")))));
        return 0;
    }
    const dir = argv[0];
    if (!dir || !fs.existsSync(dir)) {
        console.error("usage: node tests/security/report.js RESULTS_DIR | --render");
        return 2;
    }
    const threats = JSON.parse(fs.readFileSync(THREATS, "utf8"));
    const rows = evaluate(threats, assertions(dir));
    const unmatched = rows.flatMap((r) => r.tests.filter((t) => t.assertions === 0).map((t) => `${t.file}: ${t.name}`));
    const results = { generated: new Date().toISOString().slice(0, 10), passed: rows.filter((r) => r.status === "passed").length, rows };
    fs.writeFileSync(RESULTS, JSON.stringify(results, null, 2) + "\n");
    fs.writeFileSync(README, withTable(fs.readFileSync(README, "utf8"), render(results)));
    for (const r of rows) console.log(`${r.status.padEnd(8)} ${r.threat.slice(0, 100)}`);
    if (unmatched.length > 0) {
        console.error(`security table: no result for ${unmatched.length} named test(s):\n  ${unmatched.join("\n  ")}`);
        return 1;
    }
    return rows.every((r) => r.status === "passed") ? 0 : 1;
}

module.exports = { evaluate, render, withTable, START, END };
if (require.main === module) process.exitCode = main(process.argv.slice(2));

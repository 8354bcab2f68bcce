// @ts-check
/**
 * Where runs write their results, and which of them the repository publishes.
 *
 * Every test stage, the fault suite and the benches write only under the results directory ($VCL_RESULTS_DIR;
 * setup/test.sh sets it, default ${TMPDIR:-/tmp}/vllm-cluster-results), never into the tree: `npm test` leaves the
 * checkout as it found it. The figures the docs show come from committed copies of some of those files; a developer
 * publishes a run's with `npm run docs -- --accept DIR` (setup/docs.js), which copies them with `accept` below and
 * regenerates the docs' blocks from them.
 */
"use strict";
const fs = require("fs");
const os = require("os");
const path = require("path");

const ROOT = path.join(__dirname, "..", "..");

/** The results directory of this run. */
function resultsDir() {
    return process.env.VCL_RESULTS_DIR || path.join(process.env.TMPDIR || os.tmpdir(), "vllm-cluster-results");
}

const BENCH_FILES = [
    "results.json",
    "results-4hosts.json",
    "distribution.json",
    "timeline.png",
    "timeline.json",
    "timeline.txt",
    "timeline-4hosts.png",
    "timeline-4hosts.json",
    "timeline-4hosts.txt",
    "manual-steps.txt",
    "manual-steps-4hosts.txt",
];

/**
 * What a run's results directory may hold that the repository publishes: [file in the run's directory, committed
 * file]. The suite's record goes to suite-cold.json or suite-warm.json by its own cache state (see suiteTarget).
 * The benches' smokes (under smoke/) and the jest reports are never published.
 * @type {[string, string][]}
 */
const PUBLISHED = [
    ["faults/results.json", "tests/faults/results.json"],
    ["security/results.json", "tests/security/results.json"],
    ["demo.json", "tests/results/demo.json"],
    ...BENCH_FILES.map((f) => /** @type {[string, string]} */ ([`bench/${f}`, `bench/${f}`])),
];

/**
 * Where a suite record (setup/test.sh's suite.json) is published: a full run with the toolchain and the test image
 * both cached is the warm figure, one that built either the cold figure; a --fast run is not published.
 * @param {{ full?: boolean, cache?: { toolchain?: string, testImage?: string } }} suite
 * @returns {string | undefined}
 */
function suiteTarget(suite) {
    if (!suite.full) return undefined;
    const warm = suite.cache?.toolchain === "cached" && suite.cache?.testImage === "cached";
    return warm ? "tests/results/suite-warm.json" : "tests/results/suite-cold.json";
}

/**
 * Copies a run's published results from `dir` into the repository at `root`; demo.json is merged into the committed
 * one (each kind of demo run keeps its last record). Returns what was copied and what was left out, and why.
 * @param {string} dir @param {string} [root]
 * @returns {{ copied: string[], skipped: string[] }}
 */
function accept(dir, root = ROOT) {
    if (!fs.existsSync(dir) || !fs.statSync(dir).isDirectory()) throw new Error(`no results directory at ${dir}`);
    const copied = [];
    const skipped = [];
    for (const [from, to] of PUBLISHED) {
        const src = path.join(dir, from);
        if (!fs.existsSync(src)) continue;
        const dst = path.join(root, to);
        if (from === "demo.json" && fs.existsSync(dst)) {
            const merged = { ...JSON.parse(fs.readFileSync(dst, "utf8")), ...JSON.parse(fs.readFileSync(src, "utf8")) };
            fs.writeFileSync(dst, JSON.stringify(merged, null, 2) + "\n");
        } else {
            fs.copyFileSync(src, dst);
        }
        copied.push(to);
    }
    const suite = path.join(dir, "suite.json");
    if (fs.existsSync(suite)) {
        const to = suiteTarget(JSON.parse(fs.readFileSync(suite, "utf8")));
        if (to === undefined) {
            skipped.push("suite.json: a --fast run (only a full npm test's stage times are published)");
        } else {
            fs.copyFileSync(suite, path.join(root, to));
            copied.push(to);
        }
    }
    return { copied, skipped };
}

module.exports = { ROOT, resultsDir, PUBLISHED, suiteTarget, accept };

#!/usr/bin/env node
// @ts-check
/**
 * npm run docs [-- --check | --accept DIR]
 *
 * Regenerates every generated block of README.md and docs/ (setup/docBlocks.js): the measured tables from the
 * committed result files, the configuration reference from the config schema. Runs never write into the tree; their
 * results go under $VCL_RESULTS_DIR (setup/test.sh, the fault suite, the benches, the demo).
 *
 *   npm run docs                   rewrites the blocks from what is committed
 *   npm run docs -- --check        writes nothing; exits 1 naming every block that is not what its generator renders
 *   npm run docs -- --accept DIR   publishes a run's results: copies them from DIR (a run's $VCL_RESULTS_DIR) over the
 *                                  committed result files (tests/lib/results.js lists which), then rewrites the blocks
 */
"use strict";
require("./tsRequire").register();
const { allBlocks } = require("./docBlocks");
const { stale, write } = require("../tests/lib/docBlock");
const { accept } = require("../tests/lib/results");
const fs = require("fs");
const path = require("path");
const { dashboardFiles } = require("./dashboards");

const ROOT = path.join(__dirname, "..");

/**
 * The dashboard files (setup/dashboards.js) that differ from what is written; with `write`, rewritten.
 * @param {boolean} write
 */
function dashboards(write) {
    const out = [];
    for (const f of dashboardFiles()) {
        const file = path.join(ROOT, f.path);
        const now = fs.existsSync(file) ? fs.readFileSync(file, "utf8") : undefined;
        if (now === f.text) continue;
        out.push(f.path);
        if (write) fs.writeFileSync(file, f.text);
    }
    return out;
}

const USAGE = "usage: npm run docs [-- --check | --accept DIR]";

/** @param {string[]} argv */
function main(argv) {
    if (argv[0] === "--check" && argv.length === 1) {
        const old = stale(allBlocks());
        for (const b of old) console.error(`docs: ${b.page}: the ${b.name} block is not what its generator renders (npm run docs)`);
        const boards = dashboards(false);
        for (const f of boards) console.error(`docs: ${f} is not what setup/dashboards.js renders (npm run docs)`);
        if (old.length === 0 && boards.length === 0) console.log("docs: every generated block is current");
        return old.length === 0 && boards.length === 0 ? 0 : 1;
    }
    if (argv[0] === "--accept" && argv.length === 2) {
        const r = accept(argv[1]);
        for (const f of r.copied) console.log(`docs: accepted ${f}`);
        for (const s of r.skipped) console.log(`docs: left out ${s}`);
        if (r.copied.length === 0) {
            console.error(`docs: ${argv[1]} holds no results to publish`);
            return 1;
        }
    } else if (argv.length !== 0) {
        console.error(USAGE);
        return 2;
    }
    const changed = [...write(allBlocks()), ...dashboards(true)];
    console.log(changed.length === 0 ? "docs: every generated block was already current" : `docs: rewrote ${changed.join(", ")}`);
    return 0;
}

try {
    process.exitCode = main(process.argv.slice(2));
} catch (e) {
    console.error(`docs: ${e instanceof Error ? e.message : String(e)}`);
    process.exitCode = 1;
}

#!/usr/bin/env node
// @ts-check
/**
 * How long the two commands take, as runs recorded it, never pasted.
 *
 *   node tests/lib/suite.js record STAGES_TSV OUT   setup/test.sh: this run's record (suite.json) from its stage lines
 *                                                   (id, name, seconds, budget, pass|fail) and VCL_SUITE_* (full run,
 *                                                   total seconds, toolchain and test image cold or cached)
 *   node tests/lib/suite.js demo KIND SECONDS TOOLCHAIN IMAGE
 *                                                   setup/demo.sh: merges one demo run (up, up again, down) into
 *                                                   $VCL_RESULTS_DIR/demo.json
 *
 * `npm run docs` renders the README's "how long" lines and docs/testing.md's stage table from the committed records
 * in tests/results/ (suite-warm.json, suite-cold.json, demo.json); `npm run docs -- --accept DIR` publishes a run's.
 */
"use strict";
const { spawnSync } = require("child_process");
const fs = require("fs");
const os = require("os");
const path = require("path");
const { block, cell, markers } = require("./docBlock");
const { ROOT, resultsDir } = require("./results");

const GENERATOR = "tests/lib/suite.js";
const WARM = "tests/results/suite-warm.json";
const COLD = "tests/results/suite-cold.json";
const DEMO = "tests/results/demo.json";
const README_MARKERS = markers("how-long", GENERATOR, "tests/results/");
const STAGES_MARKERS = markers("suite-stages", GENERATOR, "tests/results/suite-warm.json and suite-cold.json");

/**
 * @typedef {{ id: string, name: string, seconds: number | null, budget: number, result: "pass" | "fail" | null }} Stage
 * @typedef {{ date: string, seeded?: string, full: boolean, commit: string | null,
 *   machine: { cpu: string | null, cores: number, memoryGiB: number },
 *   cache: { toolchain: string, testImage: string }, stages: Stage[],
 *   total: { seconds: number | null, passed: number, failed: number } }} Suite
 * @typedef {{ date: string, seconds: number, cache?: { toolchain: string, testImage: string }, note?: string }} DemoRun
 */

/** This machine: its CPU model, cores and memory. */
function machine() {
    const cpus = os.cpus();
    return { cpu: cpus[0]?.model.trim() || null, cores: cpus.length, memoryGiB: Math.round(os.totalmem() / 1024 ** 3) };
}

/** The checkout's commit, if it is one. */
function commit() {
    const r = spawnSync("git", ["rev-parse", "--short", "HEAD"], { cwd: ROOT, encoding: "utf8" });
    return r.status === 0 ? r.stdout.trim() : null;
}

/** A suite record from setup/test.sh's stage lines. @param {string} tsv @param {NodeJS.ProcessEnv} env @returns {Suite} */
function record(tsv, env) {
    const stages = tsv
        .split("\n")
        .filter((l) => l.trim() !== "")
        .map((l) => {
            const [id, name, seconds, budget, result] = l.split("\t");
            return { id, name, seconds: Number(seconds), budget: Number(budget), result: result === "pass" ? "pass" : "fail" };
        });
    return {
        date: new Date().toISOString().slice(0, 10),
        full: env.VCL_SUITE_FULL === "1",
        commit: commit(),
        machine: machine(),
        cache: { toolchain: env.VCL_SUITE_TOOLCHAIN ?? "not used", testImage: env.VCL_SUITE_IMAGE ?? "not used" },
        stages: /** @type {Stage[]} */ (stages),
        total: {
            seconds: Number(env.VCL_SUITE_SECONDS),
            passed: stages.filter((s) => s.result === "pass").length,
            failed: stages.filter((s) => s.result === "fail").length,
        },
    };
}

/** @param {string} rel */
const load = (rel) => JSON.parse(fs.readFileSync(path.join(ROOT, rel), "utf8"));

/** 2905 -> "2905 s (48 min)"; under ten minutes the seconds alone. @param {number} s */
const took = (s) => (s >= 600 ? `${s} s (${Math.round(s / 60)} min)` : `${s} s`);

/** The machine a record ran on, in words. @param {Suite} r */
const onMachine = (r) => `${r.machine.cores} cores${r.machine.cpu ? ` (${r.machine.cpu})` : ""}, ${r.machine.memoryGiB} GB`;

/** A record's stage by id. @param {Suite} r @param {string} id */
const stageOf = (r, id) => r.stages.find((s) => s.id === id);

/** `text` as lines of at most `width` characters, the later ones indented by `indent` (a Markdown list item). */
function wrap(/** @type {string} */ text, width = 118, indent = "  ") {
    const lines = [];
    let line = "";
    // a unit stays with its number ("12 s")
    const words = text.split(" ").reduce((/** @type {string[]} */ acc, w) => {
        if (/^s\W*$/.test(w) && /\d$/.test(acc[acc.length - 1] ?? "")) acc[acc.length - 1] += ` ${w}`;
        else acc.push(w);
        return acc;
    }, []);
    for (const word of words) {
        if (line !== "" && line.length + 1 + word.length > width) {
            lines.push(line);
            line = indent + word;
        } else {
            line = line === "" ? word : `${line} ${word}`;
        }
    }
    return [...lines, line];
}

/** "with the toolchain and the test image cached", or which of them was built. @param {{ toolchain: string, testImage: string } | undefined} c */
function caches(c) {
    if (c === undefined) return "";
    if (c.toolchain === "cached" && c.testImage === "cached") return " with the toolchain and the test image cached";
    return ` (toolchain ${c.toolchain}, test image ${c.testImage})`;
}

/** The README's lines: both commands, warm and cold, shortly; docs/testing.md has the rest. */
function howLong() {
    /** @type {Suite} */ const warm = load(WARM);
    /** @type {Suite} */ const cold = load(COLD);
    /** @type {Record<string, DemoRun>} */ const demo = load(DEMO);
    const longest = warm.stages
        .filter((s) => s.seconds !== null)
        .sort((a, b) => Number(b.seconds) - Number(a.seconds))
        .slice(0, 3)
        .map((s) => `${s.id} ${s.seconds} s`)
        .join(", ");
    const built = [
        ["toolchain", "the Pulumi toolchain (%)"],
        ["self-test", "the test image (%, within the self-test)"],
    ]
        .map(([id, what]) => [what, stageOf(cold, id)?.seconds])
        .filter(([, s]) => s != null)
        .map(([what, s]) => String(what).replace("%", `${s} s`));
    const up = demo["up"];
    return [
        ...wrap(
            `- \`npm run demo\`: ${took(up.seconds)} from nothing deployed${caches(up.cache)} (${up.date}); run again: ` +
                `${took(demo["up again"].seconds)}; \`npm run demo -- down\`: ${took(demo.down.seconds)}.`,
        ),
        ...wrap(
            `- \`npm test\`: ${warm.total.seconds === null ? "not timed" : took(warm.total.seconds)} with the caches warm ` +
                `(${warm.date}, ${warm.machine.cores} cores, ${warm.machine.memoryGiB} GB; ${warm.total.passed} of ${warm.stages.length} ` +
                `stages passed); longest stages: ${longest}.`,
        ),
        ...wrap(
            `- A first run on a fresh machine also builds ${built.join(" and ")} (${cold.date}, ${cold.machine.cores} cores` +
                `${cold.total.seconds === null ? "" : `; ${took(cold.total.seconds)} in all`}).`,
        ),
        "",
        ...wrap(
            "Figures of the last accepted runs (`tests/results/`" +
                `${[warm, cold].some((r) => r.seeded) ? "; some seeded from an earlier README" : ""}); every stage with its ` +
                "budget: [docs/testing.md](docs/testing.md#how-long).",
            118,
            "",
        ),
    ];
}

/** docs/testing.md's table: every stage of the warm and the cold record, with its budget. */
function stageTable() {
    /** @type {Suite} */ const warm = load(WARM);
    /** @type {Suite} */ const cold = load(COLD);
    const ids = [...new Set([...warm.stages, ...cold.stages].map((s) => s.id))];
    const shown = (/** @type {Stage | undefined} */ s) =>
        s === undefined || s.seconds === null
            ? s?.result === "fail"
                ? "failed"
                : "-"
            : `${s.seconds}${s.result === "fail" ? " (failed)" : ""}${s.seconds > s.budget ? " **over**" : ""}`;
    const about = (/** @type {Suite} */ r, /** @type {string} */ kind) =>
        `- ${kind}: ${r.date}${r.commit ? ` at ${r.commit}` : ""}, ${onMachine(r)}; toolchain ${r.cache.toolchain}, test image ` +
        `${r.cache.testImage}${r.total.seconds === null ? "" : `; ${took(r.total.seconds)} in all`}; ${r.total.passed} passed, ` +
        `${r.total.failed} failed.${r.seeded ? ` Seeded: ${r.seeded}.` : ""}`;
    /** @type {Record<string, DemoRun>} */ const demo = load(DEMO);
    return [
        ...wrap(about(warm, "Warm (`tests/results/suite-warm.json`)")),
        ...wrap(about(cold, "Cold (`tests/results/suite-cold.json`)")),
        ...Object.entries(demo).flatMap(([kind, r]) =>
            wrap(
                `- \`npm run demo\`, ${kind} (\`tests/results/demo.json\`): ${took(r.seconds)} on ${r.date}${caches(r.cache)}` +
                    `${r.note ? `; ${r.note}` : ""}.`,
            ),
        ),
        "",
        "| Stage | Budget (s) | Warm (s) | Cold (s) |",
        "| --- | --- | --- | --- |",
        ...ids.map((id) => {
            const w = stageOf(warm, id);
            const c = stageOf(cold, id);
            return `| ${cell((w ?? c)?.name ?? id)} | ${(w ?? c)?.budget ?? ""} | ${shown(w)} | ${shown(c)} |`;
        }),
    ];
}

/** The blocks this generator owns (setup/docs.js). */
function blocks() {
    return [
        { page: "README.md", markers: README_MARKERS, text: block(README_MARKERS, howLong()) },
        { page: "docs/testing.md", markers: STAGES_MARKERS, text: block(STAGES_MARKERS, stageTable()) },
    ];
}

/** @param {string[]} argv */
function main(argv) {
    if (argv[0] === "record" && argv.length === 3) {
        const r = record(fs.readFileSync(argv[1], "utf8"), process.env);
        fs.writeFileSync(argv[2], JSON.stringify(r, null, 2) + "\n");
        return 0;
    }
    if (argv[0] === "demo" && argv.length === 5 && /^\d+$/.test(argv[2])) {
        const file = path.join(resultsDir(), "demo.json");
        fs.mkdirSync(path.dirname(file), { recursive: true });
        const prev = fs.existsSync(file) ? JSON.parse(fs.readFileSync(file, "utf8")) : {};
        const run = {
            date: new Date().toISOString().slice(0, 10),
            seconds: Number(argv[2]),
            cache: { toolchain: argv[3], testImage: argv[4] },
        };
        fs.writeFileSync(file, JSON.stringify({ ...prev, [argv[1]]: run }, null, 2) + "\n");
        return 0;
    }
    console.error("usage: node tests/lib/suite.js record STAGES_TSV OUT | demo KIND SECONDS TOOLCHAIN IMAGE");
    return 2;
}

module.exports = { record, blocks, howLong, stageTable };
if (require.main === module) process.exitCode = main(process.argv.slice(2));

// @ts-check
/**
 * The measured tables of docs/performance.md, generated from the bench runs' committed results (bench/results.json,
 * bench/results-4hosts.json and bench/distribution.json): `npm run docs` rewrites them. A bench run writes its
 * results under $VCL_RESULTS_DIR/bench; `npm run docs -- --accept DIR` publishes them.
 *
 * Figures are seconds unless their unit says otherwise: min / median / max over the run's repeats (min / max for a
 * run of two), the ratios as the run computed them.
 */
"use strict";
const fs = require("fs");
const path = require("path");
const { block, cell, markers } = require("../tests/lib/docBlock");

const BENCH = __dirname;
const GENERATOR = "bench/report.js";
const PAGE = "docs/performance.md";
/**
 * A run's results file, as bench/*.test.ts writes it (figures by name, ratios by name).
 * @typedef {{ min: number, median: number, max: number, note?: string }} Figure
 * @param {string} f @returns {any}
 */
const load = (f) => JSON.parse(fs.readFileSync(path.join(BENCH, f), "utf8"));

/** One figure: integers from 100 up, else one decimal. @param {number} v */
const num = (v) => (Math.abs(v) >= 100 || Number.isInteger(v) ? String(Math.round(v)) : v.toFixed(1));
/** @param {number} v */
const ratio = (v) => v.toFixed(2);

/** A figure's cell: min / median / max, or min / max for two repeats. @param {Figure | undefined} f @param {number} repeats */
function spread(f, repeats) {
    if (f === undefined) return "";
    return repeats === 2 ? `${num(f.min)} / ${num(f.max)}` : `${num(f.min)} / ${num(f.median)} / ${num(f.max)}`;
}

/** Connections (sessions) of a cold up: medians. @param {any} r @param {string} kind */
function connections(r, kind) {
    const c = r.figures[`${kind}: ssh connections${kind === "pulumi" ? ", cold up" : ""}`];
    const s = r.figures[`${kind}: ssh sessions${kind === "pulumi" ? ", cold up" : ""}`];
    if (c === undefined) return "";
    const conn = r.repeats === 2 ? spread(c, 2) : num(c.median);
    return s === undefined ? conn : `${conn} (${num(s.median)})`;
}

/** The table of one end-to-end bench run (bench/results*.json). @param {string} file */
function endToEnd(file) {
    const r = load(file);
    const f = r.figures;
    const head = r.repeats === 2 ? "Seconds (min / max)" : "Seconds (min / median / max)";
    const rows = [
        [
            `\`pulumi up\` from an empty stack (image to ${r.hosts - 1} host${r.hosts > 2 ? "s" : ""}, served)`,
            spread(f["pulumi: cold up"], r.repeats),
            connections(r, "pulumi"),
        ],
        ["the manual procedure on the same hosts (`bench/manual.sh`)", spread(f["manual: bring-up"], r.repeats), connections(r, "manual")],
        ["second `pulumi up`, nothing changed", spread(f["pulumi: no-op up"], r.repeats), num(f["pulumi: ssh connections, no-op up"].max)],
        ["a serve argument changed (`serve.maxModelLen`)", spread(f["pulumi: serve-argument change"], r.repeats), ""],
        ["`pulumi destroy`", spread(f["pulumi: destroy"], r.repeats), ""],
        [
            `the image (${f["image: docker save | ssh | docker load"].note}): \`docker save | ssh | docker load\``,
            spread(f["image: docker save | ssh | docker load"], r.repeats),
            "",
        ],
        ["the same bytes: `docker save | ssh cat`", spread(f["image: raw ssh cat of the same bytes"], r.repeats), ""],
    ];
    const q = r.ratios;
    const throughput = f["image: throughput ratio (load / raw)"];
    return [
        `${r.hosts} hosts, ${r.repeats} repeats, run of ${r.when.slice(0, 10)} (\`bench/${file}\`):`,
        "",
        `| What | ${head} | SSH connections (sessions) |`,
        "| --- | --- | --- |",
        ...rows.map((x) => `| ${x.map(cell).join(" | ")} |`),
        "",
        `Ratios (medians, one run): cold up / manual **${ratio(q["cold up / manual bring-up"])}**, no-op up / cold up ${ratio(
            q["no-op up / cold up"],
        )}, serve change / cold up ${ratio(q["serve-argument change / cold up"])}; the image copy reaches ${ratio(
            throughput.median,
        )} of a raw stream of the same bytes.`,
    ];
}

/** The image and model distribution tables (bench/distribution.json). */
function distribution() {
    const d = load("distribution.json");
    const im = d.image;
    const mo = d.model;
    /** @param {Record<string, Figure>} fig @param {[string, string[]][]} names */
    const rows = (fig, names) =>
        names.map(([label, keys]) => `| ${label} | ${keys.map((k) => (fig[k] ? spread(fig[k], d.repeats) : "")).join(" | ")} |`);
    const links = `management links at ${d.shape.mgmt}, fabric links at ${d.shape.fabric}`;
    const image = [
        `Image: ${im.imageMiB} MiB, ${d.repeats} repeats, ${links}, run of ${im.when.slice(0, 10)}:`,
        "",
        "| Hosts filled | `chain`, hops over the fabric (default) | `chain`, hops over management | `relay` (one stream per host, through the operator) |",
        "| --- | --- | --- | --- |",
        ...rows(im.figures, [
            ["N = 1", ["chain N=1", "chain over management N=1", "relay N=1"]],
            ["N = 2", ["chain N=2", "chain over management N=2", "relay N=2"]],
            ["N = 4", ["chain N=4", "chain over management N=4", "relay N=4"]],
        ]),
        `| raw \`docker save \\| ssh cat\` (same bytes, one link, nothing loaded) | ${spread(
            im.figures["raw ssh cat over fabric, 1 link"],
            d.repeats,
        )} | ${spread(im.figures["raw ssh cat over management, 1 link"], d.repeats)} (through the operator) | |`,
        "",
        `Ratios (medians, one run): chain N=1 reaches **${ratio(im.ratios["fabric: raw / chain N=1"])}** of a raw stream over the ` +
            `fabric (goal: at least 0.80); chain N=4 / N=1 **${ratio(im.ratios["chain N=4 / chain N=1"])}** (goal: at most 1.10; ` +
            `relay ${ratio(im.ratios["relay N=4 / relay N=1"])}); the same chain routed over management takes ${ratio(
                im.ratios["chain over management / over the fabric, N=1"],
            )} times as long.`,
    ];
    const streams = Object.keys(mo.figures)
        .map((k) => /^(\d+) stream\(s\), N=1$/.exec(k))
        .flatMap((m) => (m ? [Number(m[1])] : []));
    const model = [
        `Model: ${mo.modelMiB} MiB in ${mo.files} files, ${d.repeats} repeats, ${links}, hops over the fabric, run of ${mo.when.slice(0, 10)}:`,
        "",
        `| Hosts filled | \`model-chain\`, ${mo.streams} streams per link (default) |`,
        "| --- | --- |",
        ...rows(mo.figures, [
            ["N = 1", ["chain N=1"]],
            ["N = 2", ["chain N=2"]],
            ["N = 4", ["chain N=4"]],
        ]),
        `| raw \`tar -ch \\| ssh\` (the same files, one link over the fabric) | ${spread(mo.figures["raw ssh tar over fabric, 1 link"], d.repeats)} |`,
        "",
        "| Streams per link (N = 1) | shaped links | uncapped links |",
        "| --- | --- | --- |",
        ...rows(
            mo.figures,
            streams.map((k) => [String(k), [`${k} stream(s), N=1`, `${k} stream(s), N=1, uncapped`]]),
        ),
        "",
        `Ratios (medians, one run): N=4 / N=1 **${ratio(mo.ratios["chain N=4 / chain N=1"])}** (goal: at most 1.10); N=1 reaches **${ratio(
            mo.ratios["fabric: raw / chain N=1"],
        )}** of the raw stream; ` +
            streams
                .filter((k) => k !== 1)
                .map(
                    (k) =>
                        `${k} streams / 1: ${ratio(mo.ratios[`${k} streams / 1, shaped`])} shaped` +
                        (mo.ratios[`${k} streams / 1, uncapped`] === undefined
                            ? ""
                            : `, ${ratio(mo.ratios[`${k} streams / 1, uncapped`])} uncapped`),
                )
                .join("; ") +
            ".",
    ];
    const up = d.update;
    const update = up
        ? [
              `Image update: one new ${up.layerMiB} MiB layer on the ${up.baseMiB} MiB image, which all ${up.hosts} hosts hold, ` +
                  `${d.repeats} repeats, ${links}, hops over the fabric, run of ${up.when.slice(0, 10)}:`,
              "",
              "| Chain of the update to every host | seconds | bytes the hosts received on the fabric |",
              "| --- | --- | --- |",
              ...[
                  ["only the missing layers (`distribution.imageLayers: missing`, default)", "missing layers"],
                  ["the whole image (`all`: plain `docker save \\| docker load`)", "whole image"],
              ].map(([label, k]) => `| ${label} | ${spread(up.figures[k], d.repeats)} | ${mib(up.figures[`bytes, ${k}`].median)} |`),
              "",
              `Ratios (medians, one run): bytes per host / the new layer **${ratio(up.ratios["bytes per host: missing layers / new layer"])}** ` +
                  `(goal: at most 1.10); time / the whole image **${ratio(up.ratios["time: missing layers / whole image"])}** (goal: at most 0.15).`,
          ]
        : ['Image update: not measured yet (`npm run bench:distribution -- -t "image update"`).'];
    return { image, model, update };
}

/** Bytes as MiB with one decimal. @param {number} bytes */
function mib(bytes) {
    return `${(bytes / (1 << 20)).toFixed(1)} MiB`;
}

/** Every block this generator owns. @returns {import("../tests/lib/docBlock").Block[]} */
function blocks() {
    const dist = distribution();
    /** @type {[import("../tests/lib/docBlock").Markers, string[]][]} */
    const parts = [
        [markers("bench-2hosts", GENERATOR, "bench/results.json"), endToEnd("results.json")],
        [markers("bench-4hosts", GENERATOR, "bench/results-4hosts.json"), endToEnd("results-4hosts.json")],
        [markers("bench-image-distribution", GENERATOR, "bench/distribution.json"), dist.image],
        [markers("bench-model-distribution", GENERATOR, "bench/distribution.json"), dist.model],
        [markers("bench-image-update", GENERATOR, "bench/distribution.json"), dist.update],
    ];
    return parts.map(([m, lines]) => ({ page: PAGE, markers: m, text: block(m, lines) }));
}

module.exports = { blocks, PAGE };

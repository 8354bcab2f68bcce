// @ts-check
/**
 * The serving benchmark's protocols, its result file, the comparison of two results and the plot (setup/benchServe.js
 * runs it; docs/benchmark.md writes the protocol down). Pure: no process, no file, no host.
 *
 * A result is comparable with another only under the same protocol: the same dataset, lengths, seed, warm-ups,
 * percentiles and levels (the protocol's whole text is recorded, so a changed protocol cannot pass for the old one).
 */
"use strict";
// every string a host or a file supplies becomes printable text as the rest of the project makes it
const { printable } = require("./discovery");

/**
 * @typedef {{ concurrency: number, prompts: number }} Level
 * @typedef {{ name: string, version: number, dataset: "random", inputLen: number, outputLen: number, seed: number,
 *             warmups: number, percentiles: number[], levels: Level[] }} Protocol
 * @typedef {{ mean?: number, median?: number, [p: string]: number | undefined }} Stats
 * @typedef {{ concurrency: number, prompts: number, completed: number, failed: number, duration: number,
 *             total_input_tokens: number, total_output_tokens: number, request_throughput: number,
 *             output_throughput: number, total_token_throughput: number, max_concurrent_requests?: number,
 *             ttft_ms: Stats, tpot_ms: Stats, itl_ms: Stats, e2el_ms: Stats }} LevelResult
 * @typedef {{ kind: "vllm-cluster serving benchmark", formatVersion: 1, time: string, seconds: number,
 *             protocol: Protocol, stack: string, cluster: string, backend: string, hosts: number,
 *             servedModelName: string, clusterFingerprint: string, endpoint: string,
 *             image: { id: string, vllm: string }, levels: LevelResult[] }} BenchResult
 */

class BenchError extends Error {}

/**
 * The protocols. `standard` is the one two users compare their boxes with; `smoke` is the same measurement at sizes a
 * CPU stand-in finishes in a minute (the simulated hosts), and is never compared with `standard`.
 * @type {Record<string, Protocol>}
 */
const PROTOCOLS = {
    standard: {
        name: "standard",
        version: 1,
        dataset: "random",
        inputLen: 1024,
        outputLen: 256,
        seed: 0,
        warmups: 2,
        percentiles: [50, 95, 99],
        levels: [
            { concurrency: 1, prompts: 16 },
            { concurrency: 2, prompts: 16 },
            { concurrency: 4, prompts: 32 },
            { concurrency: 8, prompts: 64 },
            { concurrency: 16, prompts: 128 },
        ],
    },
    smoke: {
        name: "smoke",
        version: 1,
        dataset: "random",
        inputLen: 32,
        outputLen: 8,
        seed: 0,
        warmups: 1,
        percentiles: [50, 95, 99],
        levels: [
            { concurrency: 1, prompts: 4 },
            { concurrency: 2, prompts: 4 },
        ],
    },
};

/** @param {string} name @returns {Protocol} */
function protocolOf(name) {
    const p = Object.prototype.hasOwnProperty.call(PROTOCOLS, name) ? PROTOCOLS[name] : undefined;
    if (p === undefined) throw new BenchError(`--protocol ${name}: not a protocol (${Object.keys(PROTOCOLS).join(", ")})`);
    return p;
}

/** What bench_serve.py reads after the key. @param {Protocol} protocol @param {string} baseUrl @param {string} model @param {string} tokenizer */
function planOf(protocol, baseUrl, model, tokenizer) {
    return { baseUrl, model, tokenizer, protocol };
}

/** A finite number not below 0, as the host said it; anything else is refused naming the field. @param {unknown} v @param {string} what */
function num(v, what) {
    if (typeof v !== "number" || !Number.isFinite(v) || v < 0) throw new BenchError(`the benchmark's answer: ${what} is not a number >= 0`);
    return v;
}

/** A short printable string (a host may lie: no control character, no escape sequence reaches the terminal). @param {unknown} v @param {string} what @param {RegExp} shape */
function str(v, what, shape) {
    if (typeof v !== "string" || v.length > 200 || !shape.test(v))
        throw new BenchError(`the benchmark's answer: ${what} is not what it should be`);
    return v;
}

/** @param {unknown} v @param {string} what @param {number[]} percentiles @returns {Stats} */
function stats(v, what, percentiles) {
    if (v === null || typeof v !== "object") throw new BenchError(`the benchmark's answer: ${what} is missing`);
    const o = /** @type {Record<string, unknown>} */ (v);
    /** @type {Stats} */
    const out = { mean: num(o.mean, `${what}.mean`), median: num(o.median, `${what}.median`) };
    for (const p of percentiles) out[`p${p}`] = num(o[`p${p}`], `${what}.p${p}`);
    return out;
}

/**
 * The two lines bench_serve.sh prints (what it ran, then the benchmark's line), checked field by field against the
 * plan: every level of the protocol, in order, each number finite. A failed level is an error naming it.
 * @param {string} stdout @param {Protocol} protocol
 * @returns {{ image: string, vllm: string, levels: LevelResult[] }}
 */
function parseAnswer(stdout, protocol) {
    const lines = stdout.split("\n").filter((l) => l.startsWith("{"));
    if (lines.length < 2) throw new BenchError("the benchmark printed no result (its output is above)");
    /** @type {any} */
    let ran;
    /** @type {any} */
    let line;
    try {
        ran = JSON.parse(lines[0]);
        line = JSON.parse(lines[lines.length - 1]);
    } catch {
        throw new BenchError("the benchmark's answer is not JSON");
    }
    const image = str(ran?.image, "image", /^(sha256:)?[0-9a-f]{12,64}$/);
    const vllm = line?.vllm === null ? "unknown" : str(line?.vllm, "vllm", /^[0-9A-Za-z.+_-]+$/);
    if (typeof line?.error === "string") {
        const at = typeof line.level === "number" && Number.isFinite(line.level) ? ` at concurrency ${line.level}` : "";
        throw new BenchError(`the benchmark failed${at}: ${printable(line.error).slice(0, 600)}`);
    }
    if (!Array.isArray(line?.levels) || line.levels.length !== protocol.levels.length) {
        throw new BenchError(
            `the benchmark's answer has ${Array.isArray(line?.levels) ? line.levels.length : "no"} levels, the protocol ${protocol.levels.length}`,
        );
    }
    const levels = protocol.levels.map((want, i) => {
        const got = line.levels[i] ?? {};
        const at = `level ${i + 1}`;
        if (got.concurrency !== want.concurrency || got.prompts !== want.prompts) {
            throw new BenchError(`the benchmark's answer: ${at} is not concurrency ${want.concurrency} with ${want.prompts} prompts`);
        }
        /** @type {LevelResult} */
        const r = {
            concurrency: want.concurrency,
            prompts: want.prompts,
            completed: num(got.completed, `${at}.completed`),
            failed: got.failed === undefined ? 0 : num(got.failed, `${at}.failed`),
            duration: num(got.duration, `${at}.duration`),
            total_input_tokens: num(got.total_input_tokens, `${at}.total_input_tokens`),
            total_output_tokens: num(got.total_output_tokens, `${at}.total_output_tokens`),
            request_throughput: num(got.request_throughput, `${at}.request_throughput`),
            output_throughput: num(got.output_throughput, `${at}.output_throughput`),
            total_token_throughput: num(got.total_token_throughput, `${at}.total_token_throughput`),
            ttft_ms: stats(got.ttft_ms, `${at}.ttft_ms`, protocol.percentiles),
            tpot_ms: stats(got.tpot_ms, `${at}.tpot_ms`, protocol.percentiles),
            itl_ms: stats(got.itl_ms, `${at}.itl_ms`, protocol.percentiles),
            e2el_ms: stats(got.e2el_ms, `${at}.e2el_ms`, protocol.percentiles),
        };
        if (got.max_concurrent_requests !== undefined)
            r.max_concurrent_requests = num(got.max_concurrent_requests, `${at}.max_concurrent_requests`);
        return r;
    });
    return { image, vllm, levels };
}

/** The differences between two protocols, as "key: a vs b", or [] when they are the same. @param {Protocol} a @param {Protocol} b */
function protocolDiff(a, b) {
    /** @type {string[]} */
    const out = [];
    for (const k of /** @type {(keyof Protocol)[]} */ ([
        "name",
        "version",
        "dataset",
        "inputLen",
        "outputLen",
        "seed",
        "warmups",
        "percentiles",
        "levels",
    ])) {
        const x = JSON.stringify(a?.[k]);
        const y = JSON.stringify(b?.[k]);
        if (x !== y) out.push(`${k}: ${x} vs ${y}`);
    }
    return out;
}

/**
 * A result file read back for --compare: its kind and format, and a protocol like this run's; else refused naming
 * the file and what differs.
 * @param {string} text @param {string} file @param {Protocol} protocol @returns {BenchResult}
 */
function readPrevious(text, file, protocol) {
    /** @type {any} */
    let r;
    try {
        r = JSON.parse(text);
    } catch {
        throw new BenchError(`--compare ${file}: not JSON`);
    }
    if (r?.kind !== "vllm-cluster serving benchmark" || r?.formatVersion !== 1 || !Array.isArray(r?.levels)) {
        throw new BenchError(`--compare ${file}: not a result of npm run bench:serve (format 1)`);
    }
    const diff = protocolDiff(protocol, r.protocol);
    if (diff.length) throw new BenchError(`--compare ${file}: measured under another protocol, not comparable (${diff.join("; ")})`);
    // the levels through the same checks as a fresh answer (a file is as trustworthy as a host)
    const levels = parseAnswer(
        `${JSON.stringify({ image: "0".repeat(12) })}\n${JSON.stringify({ vllm: null, levels: r.levels })}`,
        protocol,
    ).levels;
    return { ...r, levels };
}

/** @param {number} x @param {number} digits */
const fmt = (x, digits = 1) => (Number.isFinite(x) ? x.toFixed(digits) : "-");

/** The result as a table, one row per level. @param {BenchResult} r */
function renderTable(r) {
    const p = r.protocol.percentiles;
    const hi = `p${p[p.length - 2] ?? p[0]}`;
    const head = ["conc", "done", "fail", "req/s", "out tok/s", "TTFT p50", `TTFT ${hi}`, "TPOT p50", `TPOT ${hi}`, "ITL p50", "E2E p50"];
    const rows = r.levels.map((l) => [
        String(l.concurrency),
        `${l.completed}/${l.prompts}`,
        String(l.failed),
        fmt(l.request_throughput, 2),
        fmt(l.output_throughput),
        fmt(l.ttft_ms.p50 ?? NaN),
        fmt(l.ttft_ms[hi] ?? NaN),
        fmt(l.tpot_ms.p50 ?? NaN),
        fmt(l.tpot_ms[hi] ?? NaN),
        fmt(l.itl_ms.p50 ?? NaN),
        fmt(l.e2el_ms.p50 ?? NaN, 0),
    ]);
    return [
        `serving benchmark of stack ${r.stack} (${r.servedModelName}, ${r.hosts} host(s), backend ${r.backend}), protocol ${r.protocol.name} v${r.protocol.version}: ` +
            `random prompts of ${r.protocol.inputLen} tokens, ${r.protocol.outputLen} out, seed ${r.protocol.seed}; vLLM ${r.image.vllm}, image ${r.image.id.slice(0, 19)}`,
        "latencies in ms",
        ...table([head, ...rows]),
    ].join("\n");
}

/** Columns padded to their widest cell. @param {string[][]} rows */
function table(rows) {
    const widths = rows[0].map((_, i) => Math.max(...rows.map((r) => (r[i] ?? "").length)));
    return rows.map((r) => r.map((c, i) => (i === 0 ? c.padEnd(widths[i]) : c.padStart(widths[i]))).join("  "));
}

/**
 * This run against a previous one, level by level: output throughput (ratio now/before) and the p50 latencies
 * (difference, ms). @param {BenchResult} now @param {BenchResult} before
 */
function compare(now, before) {
    return now.levels.map((l, i) => {
        const b = before.levels[i];
        return {
            concurrency: l.concurrency,
            outputThroughput: {
                now: l.output_throughput,
                before: b.output_throughput,
                ratio: b.output_throughput > 0 ? l.output_throughput / b.output_throughput : NaN,
            },
            ttftP50Ms: { now: l.ttft_ms.p50 ?? NaN, before: b.ttft_ms.p50 ?? NaN, diff: (l.ttft_ms.p50 ?? NaN) - (b.ttft_ms.p50 ?? NaN) },
            tpotP50Ms: { now: l.tpot_ms.p50 ?? NaN, before: b.tpot_ms.p50 ?? NaN, diff: (l.tpot_ms.p50 ?? NaN) - (b.tpot_ms.p50 ?? NaN) },
        };
    });
}

/** @param {ReturnType<typeof compare>} c @param {BenchResult} before @param {string} file */
function renderComparison(c, before, file) {
    const sign = (/** @type {number} */ x) => (x >= 0 ? `+${fmt(x)}` : fmt(x));
    const head = ["conc", "out tok/s", "before", "ratio", "TTFT p50", "before", "diff", "TPOT p50", "before", "diff"];
    const rows = c.map((x) => [
        String(x.concurrency),
        fmt(x.outputThroughput.now),
        fmt(x.outputThroughput.before),
        fmt(x.outputThroughput.ratio, 3),
        fmt(x.ttftP50Ms.now),
        fmt(x.ttftP50Ms.before),
        sign(x.ttftP50Ms.diff),
        fmt(x.tpotP50Ms.now),
        fmt(x.tpotP50Ms.before),
        sign(x.tpotP50Ms.diff),
    ]);
    return [`against ${file} (${before.time}, stack ${before.stack}, vLLM ${before.image?.vllm}):`, ...table([head, ...rows])].join("\n");
}

/** XML text. @param {string} s */
const xml = (s) => s.replace(/[<>&"']/g, (c) => `&#${c.charCodeAt(0)};`);

/**
 * The plot: output throughput against concurrency (left), TTFT and TPOT percentiles against concurrency (right), with
 * a previous result dashed when given. SVG, made here (no plotting library on the operator's machine).
 * @param {BenchResult} r @param {BenchResult} [before]
 */
function plotSvg(r, before) {
    const W = 960;
    const H = 420;
    const panel = { w: 400, h: 300, top: 70 };
    const lefts = [70, 540];
    const xs = r.levels.map((l) => l.concurrency);
    const hi = `p${r.protocol.percentiles[r.protocol.percentiles.length - 2] ?? r.protocol.percentiles[0]}`;
    /** @type {{ title: string, unit: string, series: { name: string, color: string, dash?: boolean, ys: number[] }[] }[]} */
    const panels = [
        {
            title: "output throughput",
            unit: "tokens/s",
            series: [
                { name: "this run", color: "#1f77b4", ys: r.levels.map((l) => l.output_throughput) },
                ...(before ? [{ name: "before", color: "#1f77b4", dash: true, ys: before.levels.map((l) => l.output_throughput) }] : []),
            ],
        },
        {
            title: "latency",
            unit: "ms",
            series: [
                { name: "TTFT p50", color: "#d62728", ys: r.levels.map((l) => l.ttft_ms.p50 ?? NaN) },
                { name: `TTFT ${hi}`, color: "#ff9896", ys: r.levels.map((l) => l.ttft_ms[hi] ?? NaN) },
                { name: "TPOT p50", color: "#2ca02c", ys: r.levels.map((l) => l.tpot_ms.p50 ?? NaN) },
                { name: `TPOT ${hi}`, color: "#98df8a", ys: r.levels.map((l) => l.tpot_ms[hi] ?? NaN) },
                ...(before
                    ? [
                          { name: "TTFT p50 before", color: "#d62728", dash: true, ys: before.levels.map((l) => l.ttft_ms.p50 ?? NaN) },
                          { name: "TPOT p50 before", color: "#2ca02c", dash: true, ys: before.levels.map((l) => l.tpot_ms.p50 ?? NaN) },
                      ]
                    : []),
            ],
        },
    ];
    const out = [
        `<svg xmlns="http://www.w3.org/2000/svg" width="${W}" height="${H}" viewBox="0 0 ${W} ${H}" font-family="sans-serif" font-size="12">`,
        `<rect width="${W}" height="${H}" fill="white"/>`,
        `<text x="${W / 2}" y="22" text-anchor="middle" font-size="14">${xml(`stack ${r.stack}: ${r.servedModelName}, protocol ${r.protocol.name} v${r.protocol.version}, vLLM ${r.image.vllm}, ${r.time}`)}</text>`,
    ];
    // concurrency on a log2 axis (1, 2, 4, ...): evenly spaced levels
    const lx = xs.map((x) => Math.log2(Math.max(x, 1)));
    const x0 = Math.min(...lx);
    const x1 = Math.max(...lx);
    panels.forEach((pn, k) => {
        const left = lefts[k];
        const all = pn.series.flatMap((s) => s.ys).filter((y) => Number.isFinite(y));
        const ymax = niceMax(all.length ? Math.max(...all) : 1);
        const px = (/** @type {number} */ i) => left + (x1 > x0 ? ((lx[i] - x0) / (x1 - x0)) * panel.w : panel.w / 2);
        const py = (/** @type {number} */ y) => panel.top + panel.h - (y / ymax) * panel.h;
        out.push(`<text x="${left + panel.w / 2}" y="${panel.top - 24}" text-anchor="middle" font-size="13">${xml(pn.title)}</text>`);
        out.push(`<rect x="${left}" y="${panel.top}" width="${panel.w}" height="${panel.h}" fill="none" stroke="#888"/>`);
        for (let t = 0; t <= 4; t++) {
            const y = (ymax * t) / 4;
            out.push(`<line x1="${left}" x2="${left + panel.w}" y1="${py(y)}" y2="${py(y)}" stroke="#eee"/>`);
            out.push(`<text x="${left - 6}" y="${py(y) + 4}" text-anchor="end">${fmt(y, Number.isInteger(y) ? 0 : 1)}</text>`);
        }
        xs.forEach((x, i) => out.push(`<text x="${px(i)}" y="${panel.top + panel.h + 16}" text-anchor="middle">${x}</text>`));
        out.push(`<text x="${left + panel.w / 2}" y="${panel.top + panel.h + 34}" text-anchor="middle">concurrency</text>`);
        out.push(
            `<text x="${left - 50}" y="${panel.top + panel.h / 2}" text-anchor="middle" transform="rotate(-90 ${left - 50} ${panel.top + panel.h / 2})">${xml(pn.unit)}</text>`,
        );
        pn.series.forEach((s, j) => {
            const pts = s.ys
                .map((y, i) => (Number.isFinite(y) && i < xs.length ? `${px(i).toFixed(1)},${py(y).toFixed(1)}` : ""))
                .filter((p) => p);
            out.push(
                `<polyline class="series" data-name="${xml(s.name)}" points="${pts.join(" ")}" fill="none" stroke="${s.color}" stroke-width="2"${s.dash ? ' stroke-dasharray="6 4"' : ""}/>`,
            );
            for (const p of pts) {
                const [cx, cy] = p.split(",");
                out.push(`<circle cx="${cx}" cy="${cy}" r="3" fill="${s.color}"/>`);
            }
            const ly = panel.top + 14 + j * 15;
            out.push(
                `<line x1="${left + 10}" x2="${left + 30}" y1="${ly - 4}" y2="${ly - 4}" stroke="${s.color}" stroke-width="2"${s.dash ? ' stroke-dasharray="6 4"' : ""}/>`,
            );
            out.push(`<text x="${left + 34}" y="${ly}">${xml(s.name)}</text>`);
        });
    });
    out.push("</svg>");
    return out.join("\n") + "\n";
}

/** A round upper bound for an axis. @param {number} m */
function niceMax(m) {
    if (!(m > 0)) return 1;
    const e = Math.pow(10, Math.floor(Math.log10(m)));
    for (const f of [1, 2, 2.5, 5, 10]) if (m <= f * e) return f * e;
    return 10 * e;
}

module.exports = {
    BenchError,
    PROTOCOLS,
    protocolOf,
    planOf,
    parseAnswer,
    protocolDiff,
    readPrevious,
    renderTable,
    compare,
    renderComparison,
    plotSvg,
    printable,
};

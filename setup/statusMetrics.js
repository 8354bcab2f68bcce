// @ts-check
/**
 * vLLM's /metrics for the status view (setup/status.js): the `vllm:` lines of the Prometheus text the head's probe
 * returns, reduced to what the view shows. A gauge says the present; a counter or histogram only says something
 * over a span: between two refreshes (--watch), or with one sample, since the server started.
 */
"use strict";
const { printable } = require("./discovery");

/**
 * @typedef {{ name: string, labels: Record<string, string>, value: number }} Line
 * @typedef {{ le: number, count: number }} Bucket
 * @typedef {{ modelNames: string[], running: number, waiting: number, kvCacheUsage: number | null,
 *   promptTokens: number, generationTokens: number, ttft: Bucket[] }} Sample
 * @typedef {{ window: "interval" | "since start", seconds: number | null, running: number, waiting: number,
 *   kvCacheUsage: number | null, promptTokens: number, generationTokens: number, promptTokensPerSecond: number | null,
 *   generationTokensPerSecond: number | null, requests: number, ttftP50: Quantile | null, ttftP95: Quantile | null,
 *   restarted: boolean, modelNames: string[] }} Serving
 * @typedef {{ seconds: number, above: boolean }} Quantile
 */

const LINE_RE = /^([A-Za-z_:][A-Za-z0-9_:]*)(?:\{(.*)\})?\s+(\S+)(?:\s+\S+)?$/;
const LABEL_RE = /([A-Za-z_][A-Za-z0-9_]*)="((?:[^"\\]|\\.)*)"/g;

/** @param {string} v */
function number(v) {
    if (v === "+Inf") return Infinity;
    if (v === "-Inf") return -Infinity;
    const n = Number(v);
    return Number.isNaN(n) ? NaN : n;
}

/** A label value's escapes (\\, \" and \n); any other backslash stays as written. @param {string} v */
const labelValue = (v) => v.replace(/\\(.)/g, (e, c) => (c === "n" ? "\n" : c === "\\" || c === '"' ? c : e));

/** Every sample line of the text (comments and lines that are not samples are left out). @param {string} text @returns {Line[]} */
function parseLines(text) {
    /** @type {Line[]} */
    const out = [];
    for (const raw of text.split("\n")) {
        const m = LINE_RE.exec(raw.trim());
        if (!m) continue;
        /** @type {Record<string, string>} */
        const labels = {};
        for (const l of (m[2] ?? "").matchAll(LABEL_RE)) labels[l[1]] = labelValue(l[2]);
        const value = number(m[3]);
        if (!Number.isNaN(value)) out.push({ name: m[1], labels, value });
    }
    return out;
}

/** @param {Line[]} lines @param {string} name */
const sum = (lines, name) => lines.filter((l) => l.name === name).reduce((a, l) => a + l.value, 0);

/**
 * One /metrics text as the view needs it: gauges summed over engines (KV-cache usage averaged: each engine has
 * its own cache), counters and the time-to-first-token histogram summed over engines.
 * @param {string} text @returns {Sample}
 */
function sampleOf(text) {
    const lines = parseLines(text);
    const kv = lines.filter((l) => l.name === "vllm:kv_cache_usage_perc");
    /** @type {Map<number, number>} */
    const buckets = new Map();
    for (const l of lines) {
        if (l.name !== "vllm:time_to_first_token_seconds_bucket") continue;
        const le = number(l.labels.le ?? "");
        if (!Number.isNaN(le)) buckets.set(le, (buckets.get(le) ?? 0) + l.value);
    }
    const names = new Set(
        lines.flatMap((l) => (l.name.startsWith("vllm:") && l.labels.model_name ? [printable(l.labels.model_name).slice(0, 120)] : [])),
    );
    return {
        modelNames: [...names].sort(),
        running: sum(lines, "vllm:num_requests_running"),
        waiting: sum(lines, "vllm:num_requests_waiting"),
        kvCacheUsage: kv.length ? kv.reduce((a, l) => a + l.value, 0) / kv.length : null,
        promptTokens: sum(lines, "vllm:prompt_tokens_total"),
        generationTokens: sum(lines, "vllm:generation_tokens_total"),
        ttft: [...buckets.entries()].map(([le, count]) => ({ le, count })).sort((a, b) => a.le - b.le),
    };
}

/**
 * The q-quantile of a cumulative histogram as Prometheus' histogram_quantile estimates it: linear within the bucket
 * the rank falls in (from 0 in the first); in the +Inf bucket, the highest finite bound, marked `above`. null
 * without observations.
 * @param {Bucket[]} buckets @param {number} q @returns {Quantile | null}
 */
function quantile(buckets, q) {
    const total = buckets.length ? buckets[buckets.length - 1].count : 0;
    if (!(total > 0)) return null;
    const rank = q * total;
    const i = buckets.findIndex((b) => b.count >= rank);
    const b = buckets[i];
    if (b.le === Infinity) {
        const finite = buckets.filter((x) => x.le !== Infinity);
        return { seconds: finite.length ? finite[finite.length - 1].le : 0, above: true };
    }
    const lower = i === 0 ? 0 : buckets[i - 1].le;
    const below = i === 0 ? 0 : buckets[i - 1].count;
    const inBucket = b.count - below;
    return { seconds: inBucket > 0 ? lower + ((b.le - lower) * (rank - below)) / inBucket : b.le, above: false };
}

/** @param {number} x @param {number} digits */
const round = (x, digits) => Math.round(x * 10 ** digits) / 10 ** digits;

/** The buckets' growth from `prev` to `cur` (a bucket missing before counts from 0). @param {Bucket[]} cur @param {Bucket[]} prev */
function bucketDelta(cur, prev) {
    const before = new Map(prev.map((b) => [b.le, b.count]));
    return cur.map((b) => ({ le: b.le, count: Math.max(0, b.count - (before.get(b.le) ?? 0)) }));
}

/**
 * What the view says about serving. With a previous sample of the same server (`prev`, `seconds` between the two
 * by the head's clock): rates and quantiles over that interval; a counter that went back means the server started
 * again in between, and the interval counts from 0. Without one: totals and averages since the server started
 * (`uptime` seconds, when known).
 * @param {Sample} cur @param {{ sample: Sample, seconds: number } | undefined} prev @param {number | null} uptime
 * @returns {Serving}
 */
function servingOf(cur, prev, uptime) {
    const restarted =
        prev !== undefined && (cur.promptTokens < prev.sample.promptTokens || cur.generationTokens < prev.sample.generationTokens);
    const base = prev && !restarted && prev.seconds > 0 ? prev.sample : undefined;
    const seconds = base ? /** @type {{ seconds: number }} */ (prev).seconds : uptime !== null && uptime > 0 ? uptime : null;
    const promptTokens = cur.promptTokens - (base?.promptTokens ?? 0);
    const generationTokens = cur.generationTokens - (base?.generationTokens ?? 0);
    const ttft = base ? bucketDelta(cur.ttft, base.ttft) : cur.ttft;
    const perSecond = (/** @type {number} */ n) => (seconds === null ? null : round(n / seconds, 2));
    const q = (/** @type {Quantile | null} */ x) => x && { seconds: round(x.seconds, 4), above: x.above };
    return {
        window: base ? "interval" : "since start",
        seconds: seconds === null ? null : round(seconds, 3),
        running: cur.running,
        waiting: cur.waiting,
        kvCacheUsage: cur.kvCacheUsage,
        promptTokens,
        generationTokens,
        promptTokensPerSecond: perSecond(promptTokens),
        generationTokensPerSecond: perSecond(generationTokens),
        requests: ttft.length ? ttft[ttft.length - 1].count : 0,
        ttftP50: q(quantile(ttft, 0.5)),
        ttftP95: q(quantile(ttft, 0.95)),
        restarted,
        modelNames: cur.modelNames,
    };
}

module.exports = { parseLines, sampleOf, quantile, bucketDelta, servingOf };

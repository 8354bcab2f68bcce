/**
 * setup/statusMetrics.js on /metrics text as vLLM 0.32 writes it (tests/unit/fixtures/status/metrics-*.txt, made
 * by make_metrics.py from vLLM's metric declarations): the gauges, the counters' rates between two refreshes, and
 * time to first token p50/p95 from the histogram's buckets as Prometheus' histogram_quantile estimates them.
 */
import * as fs from "fs";
import * as path from "path";
import { FIXTURES } from "./statusHosts";

// eslint-disable-next-line @typescript-eslint/no-require-imports
const m = require("../../setup/statusMetrics.js");

const text = (f: string) => fs.readFileSync(path.join(FIXTURES, f), "utf8");
/** Only the lines the head's probe passes on (vllm: and no _created). */
const probed = (f: string) =>
    text(f)
        .split("\n")
        .filter((l) => l.startsWith("vllm:") && !/_created[{ ]/.test(l))
        .join("\n");

describe("status metrics", () => {
    test("one sample: the gauges now, the counters and the histogram since the server started", () => {
        const s = m.sampleOf(probed("metrics-1.txt"));
        expect(s).toMatchObject({ modelNames: ["qwen3.5-122b-a10b-fp8"], running: 8, waiting: 5, kvCacheUsage: 0.4375 });
        expect(s.promptTokens).toBe(120 * 900 + 20 * 1200);
        expect(s.generationTokens).toBe(120 * 60 + 20 * 80);
        expect(s.ttft[s.ttft.length - 1]).toEqual({ le: Infinity, count: 140 });
        // the whole text (with the Python and process collectors' lines) says the same
        expect(m.sampleOf(text("metrics-1.txt"))).toEqual(s);
    });

    test("one sample: totals and averages since the server started, quantiles over every request so far", () => {
        const v = m.servingOf(m.sampleOf(probed("metrics-0.txt")), undefined, 7200);
        expect(v).toMatchObject({ window: "since start", seconds: 7200, promptTokens: 108000, generationTokens: 7200, requests: 120 });
        expect(v.promptTokensPerSecond).toBeCloseTo(15, 6);
        expect(v.generationTokensPerSecond).toBeCloseTo(1, 6);
        // 120 first tokens, 20 each at 0.18 0.22 0.3 0.45 0.6 0.9 s: the 60th in (0.25, 0.5] holding the 41st-80th
        expect(v.ttftP50.seconds).toBeCloseTo(0.25 + (0.25 * 20) / 40, 9);
        // the 114th in (0.75, 1.0] holding the 101st-120th
        expect(v.ttftP95.seconds).toBeCloseTo(0.75 + (0.25 * 14) / 20, 9);
        // the server's age unknown: no rate is made up
        expect(m.servingOf(m.sampleOf(probed("metrics-0.txt")), undefined, null).promptTokensPerSecond).toBeNull();
    });

    test("two refreshes 10 s apart: rates and quantiles over the interval alone", () => {
        const before = m.sampleOf(probed("metrics-0.txt"));
        const v = m.servingOf(m.sampleOf(probed("metrics-1.txt")), { sample: before, seconds: 10 }, 7210);
        expect(v).toMatchObject({
            window: "interval",
            seconds: 10,
            promptTokens: 24000,
            generationTokens: 1600,
            requests: 20,
            restarted: false,
        });
        expect(v.promptTokensPerSecond).toBe(2400);
        expect(v.generationTokensPerSecond).toBe(160);
        // 20 first tokens, 5 each at 0.6 0.9 1.2 2.0 s: the 10th ends (0.75, 1.0]; the 19th is in (1.0, 2.5]
        expect(v.ttftP50).toEqual({ seconds: 1, above: false });
        expect(v.ttftP95.seconds).toBeCloseTo(1 + (1.5 * 9) / 10, 9);
        // nothing happened in between: no first token, no quantile
        const idle = m.servingOf(before, { sample: before, seconds: 2 }, 7202);
        expect(idle).toMatchObject({ requests: 0, ttftP50: null, promptTokensPerSecond: 0 });
    });

    test("a counter that went back: the server started again in between, so the figures count from its start", () => {
        const later = m.sampleOf(probed("metrics-1.txt"));
        const v = m.servingOf(m.sampleOf(probed("metrics-0.txt")), { sample: later, seconds: 10 }, 30);
        expect(v).toMatchObject({ window: "since start", seconds: 30, restarted: true, promptTokens: 108000 });
    });

    test("quantiles: linear within a bucket, from 0 in the first, the highest finite bound when the rank is in +Inf", () => {
        const b = (pairs: [number, number][]) => pairs.map(([le, count]) => ({ le, count }));
        expect(
            m.quantile(
                b([
                    [1, 10],
                    [Infinity, 10],
                ]),
                0.5,
            ),
        ).toEqual({ seconds: 0.5, above: false });
        expect(
            m.quantile(
                b([
                    [1, 2],
                    [2, 4],
                    [Infinity, 10],
                ]),
                0.95,
            ),
        ).toEqual({ seconds: 2, above: true });
        expect(
            m.quantile(
                b([
                    [1, 0],
                    [Infinity, 0],
                ]),
                0.5,
            ),
        ).toBeNull();
        expect(m.quantile([], 0.5)).toBeNull();
    });

    test("lines that are no samples, odd values and escaped labels are read as Prometheus' text format says", () => {
        const lines = m.parseLines(
            [
                "# HELP vllm:x a help text",
                'vllm:num_requests_running{engine="0",model_name="a \\"b\\" \\\\ c"} 2 1796378400000',
                'vllm:num_requests_running{engine="1",model_name="m"} NaN',
                "vllm:num_requests_waiting +Inf",
                "not a sample line at all {",
            ].join("\n"),
        );
        expect(lines).toEqual([
            { name: "vllm:num_requests_running", labels: { engine: "0", model_name: 'a "b" \\ c' }, value: 2 },
            { name: "vllm:num_requests_waiting", labels: {}, value: Infinity },
        ]);
        // two engines: requests add up, KV-cache usage is their mean
        const two = m.sampleOf(
            'vllm:num_requests_running{engine="0"} 2\nvllm:num_requests_running{engine="1"} 3\n' +
                'vllm:kv_cache_usage_perc{engine="0"} 0.2\nvllm:kv_cache_usage_perc{engine="1"} 0.4\n',
        );
        expect(two).toMatchObject({ running: 5, kvCacheUsage: expect.closeTo(0.3, 9) });
        // a model name with a terminal's control sequence in it is shown, not obeyed
        expect(
            m.sampleOf('vllm:num_requests_running{model_name="x\\u001b[2J"} 1\nvllm:num_requests_waiting{model_name="y\x1b[H"} 0')
                .modelNames,
        ).toEqual(["x\\u001b[2J", "y\\x1b[H"]);
    });
});

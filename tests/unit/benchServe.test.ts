/**
 * The serving benchmark's parts on this machine: the protocols and the result's checks (setup/benchServeModel.js),
 * the step on the head (infra/builders/bench.ts, infra/scripts/bench_serve.sh with a stand-in `docker` that records
 * its argv), and bench_serve.py with a stand-in for vLLM's bench module (a Python package named `vllm`, written
 * here, that records what it was given and returns a canned result). The real `vllm bench serve` against a real
 * server runs in the fault suite on the simulated hosts (tests/faults).
 */
import { spawnSync } from "child_process";
import * as fs from "fs";
import * as path from "path";
import { benchBaseUrl, benchServeStep } from "../../infra/builders/bench";
import { localStepArgv } from "../../infra/builders/remoteStep";
import { NODES, ROOT, statusSpec, tempState } from "./statusHosts";

// eslint-disable-next-line @typescript-eslint/no-require-imports
const m = require("../../setup/benchServeModel");

// the tests that spawn sh, python3 or node: npm test runs this file beside the clusters, on a loaded machine
jest.setTimeout(30_000);

const SMOKE = m.PROTOCOLS.smoke;
const KEY = "sk-bench-test-key-0123456789";

/** One level of bench_serve.py's answer, as it summarises vLLM's result. */
function level(concurrency: number, prompts: number, over: Record<string, unknown> = {}) {
    const s = (base: number) => ({ mean: base, median: base, p50: base, p95: base * 1.5, p99: base * 2 });
    return {
        concurrency,
        prompts,
        completed: prompts,
        failed: 0,
        duration: 2.5,
        total_input_tokens: 32 * prompts,
        total_output_tokens: 8 * prompts,
        request_throughput: 1.6 * concurrency,
        output_throughput: 12.8 * concurrency,
        total_token_throughput: 64 * concurrency,
        ttft_ms: s(120 * concurrency),
        tpot_ms: s(40),
        itl_ms: s(40),
        e2el_ms: s(400),
        ...over,
    };
}

const IMAGE_LINE = JSON.stringify({ image: "sha256:" + "ab".repeat(32), container: "vllm-serve-bench" });
const answer = (levels: unknown[], extra: Record<string, unknown> = {}) =>
    `${IMAGE_LINE}\n${JSON.stringify({ vllm: "0.32.0", levels, ...extra })}\n`;

function result(over: Record<string, unknown> = {}) {
    const a = m.parseAnswer(answer([level(1, 4), level(2, 4)]), SMOKE);
    return {
        kind: "vllm-cluster serving benchmark",
        formatVersion: 1,
        time: "2026-12-07T20:00:00.000Z",
        seconds: 61,
        protocol: SMOKE,
        stack: "local",
        cluster: "vllm",
        backend: "ray",
        hosts: 2,
        servedModelName: "tiny-qwen2",
        clusterFingerprint: "0123456789abcdef",
        endpoint: "https://10.231.0.11:8000/v1",
        image: { id: a.image, vllm: a.vllm },
        levels: a.levels,
        ...over,
    };
}

describe("protocols and the benchmark's answer", () => {
    test("the protocols are fixed and named; an unknown one is refused listing them", () => {
        expect(m.protocolOf("standard")).toMatchObject({ inputLen: 1024, outputLen: 256, seed: 0, dataset: "random" });
        expect(m.protocolOf("standard").levels.map((l: { concurrency: number }) => l.concurrency)).toEqual([1, 2, 4, 8, 16]);
        expect(() => m.protocolOf("fast")).toThrow("--protocol fast: not a protocol (standard, smoke)");
        expect(() => m.protocolOf("__proto__")).toThrow("not a protocol");
    });

    test("an honest answer gives every level of the protocol, in order, with its percentiles", () => {
        const a = m.parseAnswer(`  | noise\n${answer([level(1, 4), level(2, 4)])}`, SMOKE);
        expect(a.image).toBe("sha256:" + "ab".repeat(32));
        expect(a.vllm).toBe("0.32.0");
        expect(a.levels.map((l: { concurrency: number }) => l.concurrency)).toEqual([1, 2]);
        expect(a.levels[1].ttft_ms).toEqual({ mean: 240, median: 240, p50: 240, p95: 360, p99: 480 });
    });

    test.each([
        ["a level missing", answer([level(1, 4)]), "has 1 levels, the protocol 2"],
        ["levels out of order", answer([level(2, 4), level(1, 4)]), "level 1 is not concurrency 1 with 4 prompts"],
        [
            "a rate that is a string",
            answer([level(1, 4, { output_throughput: "fast" }), level(2, 4)]),
            "level 1.output_throughput is not a number",
        ],
        ["a negative duration", answer([level(1, 4), level(2, 4, { duration: -1 })]), "level 2.duration is not a number"],
        [
            "a percentile missing",
            answer([level(1, 4, { tpot_ms: { mean: 1, median: 1, p50: 1, p95: 1 } }), level(2, 4)]),
            "level 1.tpot_ms.p99",
        ],
        [
            "an image that is no ID",
            `{"image":"\\u001b[2Jx"}\n${JSON.stringify({ vllm: "0.32.0", levels: [] })}\n`,
            "image is not what it should be",
        ],
        [
            "a version with a newline",
            `${IMAGE_LINE}\n${JSON.stringify({ vllm: "0.32\nEVIL", levels: [] })}\n`,
            "vllm is not what it should be",
        ],
        ["no lines at all", "Traceback ...\n", "printed no result"],
    ])("%s is refused naming it", (_what, stdout, says) => {
        expect(() => m.parseAnswer(stdout, SMOKE)).toThrow(says);
    });

    test("a failed level is an error naming the concurrency, its text made printable", () => {
        const out = `${IMAGE_LINE}\n${JSON.stringify({ vllm: "0.32.0", levels: [level(1, 4)], error: "ClientConnectorError: refused\u001b[31m", level: 2 })}\n`;
        expect(() => m.parseAnswer(out, SMOKE)).toThrow("the benchmark failed at concurrency 2: ClientConnectorError: refused\\x1b[31m");
    });
});

describe("a previous result, the comparison and the plot", () => {
    test("--compare reads a result of the same protocol and gives ratios and differences per level", () => {
        const now = result();
        const before = m.readPrevious(
            JSON.stringify(result({ levels: [level(1, 4, { output_throughput: 10 }), level(2, 4, { output_throughput: 20 })] })),
            "b.json",
            SMOKE,
        );
        const c = m.compare(now, before);
        expect(c.map((x: { outputThroughput: { ratio: number } }) => x.outputThroughput.ratio)).toEqual([1.28, 1.28]);
        expect(c[1].ttftP50Ms).toEqual({ now: 240, before: 240, diff: 0 });
        const text = m.renderComparison(c, before, "b.json");
        expect(text).toContain("against b.json");
        expect(text).toMatch(/^1\s+12\.8\s+10\.0\s+1\.280/m);
    });

    test("a result under another protocol is refused naming what differs; a file that is no result is refused", () => {
        const other = { ...SMOKE, outputLen: 16 };
        expect(() => m.readPrevious(JSON.stringify(result({ protocol: other })), "old.json", SMOKE)).toThrow(
            "--compare old.json: measured under another protocol, not comparable (outputLen: 8 vs 16)",
        );
        expect(() => m.readPrevious(JSON.stringify(result({ protocol: m.PROTOCOLS.standard })), "s.json", SMOKE)).toThrow(
            'name: "smoke" vs "standard"',
        );
        expect(() => m.readPrevious("{", "x.json", SMOKE)).toThrow("--compare x.json: not JSON");
        expect(() => m.readPrevious("{}", "x.json", SMOKE)).toThrow("not a result of npm run bench:serve");
        // its levels pass the same checks as a host's answer
        expect(() =>
            m.readPrevious(JSON.stringify(result({ levels: [level(1, 4, { completed: "all" }), level(2, 4)] })), "x.json", SMOKE),
        ).toThrow("level 1.completed");
    });

    test("the table names the stack, protocol and image, one row per level", () => {
        const t = m.renderTable(result());
        expect(t).toContain("protocol smoke v1: random prompts of 32 tokens, 8 out, seed 0; vLLM 0.32.0");
        expect(t.split("\n").filter((l: string) => /^[12]\s/.test(l))).toHaveLength(2);
    });

    test("the plot: one line per series with a point per level; a hostile name is escaped", () => {
        const svg = m.plotSvg(result({ stack: "<script>alert(1)</script>" }), result());
        expect(svg.startsWith("<svg")).toBe(true);
        expect(svg).not.toContain("<script>");
        expect(svg).toContain("&#60;script&#62;");
        const lines = [...svg.matchAll(/<polyline class="series" data-name="([^"]+)" points="([^"]*)"/g)];
        expect(lines.map((x) => x[1])).toEqual([
            "this run",
            "before",
            "TTFT p50",
            "TTFT p95",
            "TPOT p50",
            "TPOT p95",
            "TTFT p50 before",
            "TPOT p50 before",
        ]);
        for (const x of lines) expect(x[2].split(" ")).toHaveLength(2);
        // throughput doubles with concurrency here: the second point is higher on the plot (a smaller y)
        const [p1, p2] = lines[0][2].split(" ").map((p: string) => Number(p.split(",")[1]));
        expect(p2).toBeLessThan(p1);
    });
});

describe("the step on the head", () => {
    let dir: string;
    beforeEach(() => (dir = tempState("vcl-bench-")));
    afterEach(() => fs.rmSync(dir, { recursive: true, force: true }));

    test("its arguments: the serve container, the model, the certificate with TLS; no key; the URL the certificate names", () => {
        const spec = statusSpec("/var/lib/vllm-cluster");
        const step = benchServeStep(spec);
        expect(step.what).toBe("bench:serve on node spark-1");
        expect(step.args.slice(0, 4)).toEqual([
            "node=spark-1",
            "serve=vllm-serve",
            "model-path=/var/lib/vllm-cluster/models/tiny-qwen2",
            "cert=/var/lib/vllm-cluster/spark-1/tls-cert.pem",
        ]);
        expect(benchServeStep({ ...spec, tls: false }).args[3]).toBe("cert=");
        expect(benchBaseUrl(spec)).toBe("https://10.231.0.11:8000");
        expect(benchBaseUrl({ ...spec, tls: false, port: 9000 })).toBe("http://10.231.0.11:9000");
        expect(() => benchServeStep({ ...spec, nodes: [NODES[1]] })).toThrow("names no head");
    });

    /** bench_serve.sh with a stand-in docker that answers inspect as told and records run's argv. */
    function runStep(inspect: string, spec = statusSpec(dir)) {
        const bin = path.join(dir, "bin");
        fs.mkdirSync(bin, { recursive: true });
        fs.mkdirSync(spec.modelPath, { recursive: true });
        fs.mkdirSync(path.join(dir, "spark-1"), { recursive: true });
        fs.writeFileSync(path.join(dir, "spark-1", "tls-cert.pem"), "cert");
        fs.writeFileSync(
            path.join(bin, "docker"),
            `#!/bin/sh\ncase "$1 $2" in\n"inspect --format") case "$4" in *-bench) exit 1 ;; esac; ${inspect} ;;\n*) printf '%s\\n' "$@" > ${dir}/argv; cat > ${dir}/stdin ;;\nesac\n`,
            { mode: 0o755 },
        );
        const [sh, ...args] = localStepArgv(benchServeStep(spec));
        return spawnSync(sh, args, {
            input: `${KEY}\n{"plan":1}\n`,
            encoding: "utf8",
            env: { ...process.env, PATH: `${bin}:${process.env.PATH}` },
        });
    }

    test("bench_serve.sh runs the serve container's own image, the key and plan on stdin only", () => {
        const r = runStep(`echo "true sha256:${"cd".repeat(32)}"`);
        expect(r.status).toBe(0);
        expect(JSON.parse(r.stdout.split("\n")[0])).toEqual({ image: `sha256:${"cd".repeat(32)}`, container: "vllm-serve-bench" });
        const argv = fs.readFileSync(path.join(dir, "argv"), "utf8").split("\n");
        expect(argv.slice(0, 6)).toEqual(["run", "--rm", "-i", "--name", "vllm-serve-bench", "--network"]);
        expect(argv).toContain(`${path.join(dir, "spark-1", "tls-cert.pem")}:/run/vllm-cluster/bench-ca.pem:ro`);
        expect(argv).toContain("SSL_CERT_FILE=/run/vllm-cluster/bench-ca.pem");
        expect(argv).toContain(`sha256:${"cd".repeat(32)}`);
        expect(argv.join(" ")).not.toContain(KEY);
        expect(fs.readFileSync(path.join(dir, "stdin"), "utf8")).toBe(`${KEY}\n{"plan":1}\n`);
    });

    test("bench_serve.sh refuses a serve container that is not running, naming the node and the container", () => {
        const r = runStep('echo "false sha256:00"');
        expect(r.status).toBe(1);
        expect(r.stderr).toContain("bench:serve on node spark-1: vllm-serve is not running");
        expect(fs.existsSync(path.join(dir, "argv"))).toBe(false);
        const gone = runStep("exit 1");
        expect(gone.stderr).toContain("no container vllm-serve here");
    });
});

describe("bench_serve.py with a stand-in for vLLM's bench module", () => {
    let dir: string;
    beforeEach(() => {
        dir = tempState("vcl-bench-py-");
        const pkg = path.join(dir, "vllm");
        fs.mkdirSync(path.join(pkg, "benchmarks"), { recursive: true });
        fs.mkdirSync(path.join(pkg, "utils"), { recursive: true });
        fs.writeFileSync(path.join(pkg, "__init__.py"), '__version__ = "9.9.9-standin"\n');
        fs.writeFileSync(path.join(pkg, "utils", "__init__.py"), "");
        fs.writeFileSync(
            path.join(pkg, "utils", "argparse_utils.py"),
            "import argparse\nFlexibleArgumentParser = argparse.ArgumentParser\n",
        );
        fs.writeFileSync(path.join(pkg, "benchmarks", "__init__.py"), "");
        // the stand-in: vLLM's flags the script passes, a print to stdout as vLLM's does, a record of what it got
        fs.writeFileSync(
            path.join(pkg, "benchmarks", "serve.py"),
            [
                "import json, os, sys",
                "def add_cli_args(p):",
                "    for f in ['--backend','--endpoint','--base-url','--model','--tokenizer','--dataset-name','--random-input-len',",
                "              '--random-output-len','--random-range-ratio','--temperature','--seed','--num-prompts','--max-concurrency',",
                "              '--request-rate','--num-warmups','--percentile-metrics','--metric-percentiles','--ready-check-timeout-sec']:",
                "        p.add_argument(f)",
                "    p.add_argument('--ignore-eos', action='store_true'); p.add_argument('--disable-tqdm', action='store_true')",
                "    p.add_argument('--header', nargs='+')",
                "def main(args):",
                "    print('============ Serving Benchmark Result ============')",
                "    with open(os.environ['STANDIN_LOG'], 'a') as f:",
                "        f.write(json.dumps({'args': vars(args), 'env': dict(os.environ), 'argv': sys.argv}) + '\\n')",
                "    c = int(args.max_concurrency)",
                "    if os.environ.get('STANDIN_FAIL') == str(c):",
                "        raise RuntimeError('Initial test run failed: 401 for ' + args.header[0])",
                "    r = {'completed': int(args.num_prompts), 'failed': 0, 'duration': 1.0, 'total_input_tokens': 1, 'total_output_tokens': 2,",
                "         'request_throughput': 1.0 * c, 'output_throughput': 8.0 * c, 'total_token_throughput': 9.0 * c, 'input_lens': [1, 2]}",
                "    for m in ('ttft', 'tpot', 'itl', 'e2el'):",
                "        r.update({f'mean_{m}_ms': 1.0, f'median_{m}_ms': 1.0, f'std_{m}_ms': 0.1, f'p50_{m}_ms': 1.0, f'p95_{m}_ms': 2.0, f'p99_{m}_ms': 3.0})",
                "    return r",
                "",
            ].join("\n"),
        );
    });
    afterEach(() => fs.rmSync(dir, { recursive: true, force: true }));

    const plan = { baseUrl: "https://10.231.0.11:8000", model: "tiny-qwen2", tokenizer: "/model", protocol: SMOKE };
    function bench(env: Record<string, string> = {}) {
        return spawnSync("python3", [path.join(ROOT, "infra", "scripts", "bench_serve.py")], {
            input: `${KEY}\n${JSON.stringify(plan)}\n`,
            encoding: "utf8",
            env: { ...process.env, PYTHONPATH: dir, STANDIN_LOG: path.join(dir, "log"), ...env },
        });
    }

    test("every level in one process: the key only in the Authorization header; stdout is the line alone", () => {
        const r = bench();
        expect(r.status).toBe(0);
        // the stand-in's print went to stderr
        expect(r.stderr).toContain("Serving Benchmark Result");
        expect(r.stdout.trim().split("\n")).toHaveLength(1);
        const a = m.parseAnswer(`${IMAGE_LINE}\n${r.stdout}`, SMOKE);
        expect(a.vllm).toBe("9.9.9-standin");
        expect(a.levels.map((l: { output_throughput: number }) => l.output_throughput)).toEqual([8, 16]);
        const calls = fs
            .readFileSync(path.join(dir, "log"), "utf8")
            .trim()
            .split("\n")
            .map((l) => JSON.parse(l));
        expect(calls.map((c) => c.args.max_concurrency)).toEqual(["1", "2"]);
        for (const c of calls) {
            expect(c.args.header).toEqual([`Authorization=Bearer ${KEY}`]);
            expect(c.args).toMatchObject({
                seed: "0",
                random_input_len: "32",
                random_output_len: "8",
                ignore_eos: true,
                base_url: plan.baseUrl,
            });
            expect(JSON.stringify(c.env)).not.toContain(KEY);
            expect(JSON.stringify(c.argv)).not.toContain(KEY);
        }
    });

    test("a level that fails ends the run with a line naming it, the levels before it kept, the key blotted out", () => {
        const r = bench({ STANDIN_FAIL: "2" });
        expect(r.status).toBe(1);
        expect(r.stdout).not.toContain(KEY);
        const line = JSON.parse(r.stdout.trim());
        expect(line).toMatchObject({
            level: 2,
            error: "RuntimeError: Initial test run failed: 401 for Authorization=Bearer (the API key)",
        });
        expect(line.levels).toHaveLength(1);
        expect(() => m.parseAnswer(`${IMAGE_LINE}\n${r.stdout}`, SMOKE)).toThrow("the benchmark failed at concurrency 2");
    });
});

describe("npm run bench:serve's arguments", () => {
    const cli = (args: string[]) =>
        spawnSync("node", [path.join(ROOT, "setup", "benchServe.js"), ...args], { encoding: "utf8", cwd: ROOT });
    test.each([
        [[], "--stack is required"],
        [["--stack", "local", "--protocol", "quick"], "--protocol quick: not a protocol (standard, smoke)"],
        [["--stack", "a b"], "--stack a b: not a stack name"],
        [["--stack", "local", "--timeout", "5"], "--timeout 5: expected seconds, 10 to 86400"],
        [["--stack", "local", "--bogus"], "unknown argument --bogus"],
    ])(
        "%j is refused before anything runs",
        (args, says) => {
            const r = cli(args);
            expect(r.status).toBe(2);
            expect(r.stderr).toContain(`bench:serve: ${says}`);
        },
        60_000,
    );
});

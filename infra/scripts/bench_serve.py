"""A serving benchmark of the cluster's API, run by the image's own vLLM (`vllm bench serve`'s code) on the head.

    docker run --rm -i --network host -v MODEL:/model:ro [-v CERT:CA:ro -e SSL_CERT_FILE=CA] IMAGE python3 -c <this>

stdin: the API key on its first line, then the plan as one JSON line:
    {"baseUrl": "https://HEAD:PORT", "model": SERVED_NAME, "tokenizer": "/model",
     "protocol": {"dataset": "random", "inputLen": N, "outputLen": N, "seed": N, "warmups": N,
                  "percentiles": [50, 95, 99], "levels": [{"concurrency": C, "prompts": N}, ...]}}

The key never reaches a command line or an environment: it goes into the requests' Authorization header inside this
process (vLLM's bench reads OPENAI_API_KEY from the environment otherwise, where `docker inspect` and /proc would show
it). Every level runs in this one process (vLLM and the tokenizer are imported once), with the same seed, so each
level sends the same prompts.

Prints one JSON line on stdout: {"vllm": VERSION, "levels": [SUMMARY, ...]} when every level ran, or
{"vllm": VERSION, "levels": [...the ones that ran...], "error": TEXT, "level": C} when one failed (and exits 1).
vLLM's own output (its progress and its table) goes to stderr: the line is the only thing on stdout.
"""

import json
import os
import sys

# The line's own stream: stdout as the process started. Everything else printed from here on goes to stderr.
_LINE = os.fdopen(os.dup(1), "w")
os.dup2(2, 1)

# What the summary keeps of vLLM's result (the per-request lists are left out: they are the bulk of it).
KEPT = (
    "completed",
    "failed",
    "duration",
    "total_input_tokens",
    "total_output_tokens",
    "request_throughput",
    "output_throughput",
    "total_token_throughput",
    "max_concurrent_requests",
)
METRICS = ("ttft", "tpot", "itl", "e2el")


def say(**fields):
    _LINE.write(json.dumps(fields, sort_keys=True) + "\n")
    _LINE.flush()


def summary(result, concurrency, prompts, percentiles):
    """vLLM's result dict for one level, as the benchmark records it: its counts, rates and latency percentiles."""
    out = {"concurrency": concurrency, "prompts": prompts}
    for k in KEPT:
        if k in result and result[k] is not None:
            out[k] = result[k]
    for m in METRICS:
        stats = {}
        for name, key in [("mean", f"mean_{m}_ms"), ("median", f"median_{m}_ms")] + [
            (f"p{p:g}", f"p{p:g}_{m}_ms") for p in percentiles
        ]:
            if key in result and result[key] is not None:
                stats[name] = result[key]
        if stats:
            out[f"{m}_ms"] = stats
    return out


def level_args(parser, plan, level):
    """vLLM's own bench serve arguments for one level (parsed by its own parser: its defaults, its checks)."""
    p = plan["protocol"]
    argv = [
        "--backend", "openai-chat",
        "--endpoint", "/v1/chat/completions",
        "--base-url", plan["baseUrl"],
        "--model", plan["model"],
        "--tokenizer", plan["tokenizer"],
        "--dataset-name", p["dataset"],
        "--random-input-len", str(p["inputLen"]),
        "--random-output-len", str(p["outputLen"]),
        "--random-range-ratio", "0",
        "--ignore-eos",
        "--temperature", "0",
        "--seed", str(p["seed"]),
        "--num-prompts", str(level["prompts"]),
        "--max-concurrency", str(level["concurrency"]),
        "--request-rate", "inf",
        "--num-warmups", str(p["warmups"]),
        "--percentile-metrics", ",".join(METRICS),
        "--metric-percentiles", ",".join(f"{x:g}" for x in p["percentiles"]),
        "--disable-tqdm",
        "--ready-check-timeout-sec", "60",
    ]  # fmt: skip
    args = parser.parse_args(argv)
    return args


def main():
    key = sys.stdin.readline().rstrip("\n")
    plan = json.loads(sys.stdin.readline())
    if not key:
        say(vllm=None, levels=[], error="no API key on the first line of stdin")
        return 1
    try:
        import vllm

        version = getattr(vllm, "__version__", "unknown")
        from vllm.benchmarks.serve import add_cli_args
        from vllm.benchmarks.serve import main as bench_main
        from vllm.utils.argparse_utils import FlexibleArgumentParser
    except Exception as e:  # the image's vLLM has no bench serve this script knows
        say(vllm=None, levels=[], error=f"the image's vLLM has no serving benchmark ({type(e).__name__}: {e})")
        return 1
    parser = FlexibleArgumentParser(prog="vllm bench serve")
    add_cli_args(parser)
    done = []
    for level in plan["protocol"]["levels"]:
        try:
            args = level_args(parser, plan, level)
            args.header = [f"Authorization=Bearer {key}"]
            result = bench_main(args)
        except BaseException as e:  # argparse exits, aiohttp and vLLM raise: the level failed, said as such
            why = f"{type(e).__name__}: {e}".replace(key, "(the API key)")
            say(vllm=version, levels=done, error=why[:2000], level=level["concurrency"])
            return 1
        done.append(summary(result, level["concurrency"], level["prompts"], plan["protocol"]["percentiles"]))
    say(vllm=version, levels=done)
    return 0


if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/env bash
# stage: benchmark smoke (the Pulumi side once: cold up with the image in place, no-op up, destroy; the timeline chart)
#
#   sudo npm run bench              3 repeats; writes results.json, timeline.{txt,json,png} and manual-steps.txt
#                                   (the manual procedure's steps with their times) to $VCL_RESULTS_DIR/bench
#   sudo npm run bench -- --smoke   the Pulumi side once, into $VCL_RESULTS_DIR/smoke/bench (what `npm test` runs;
#                                   the image stays on every host): the bench works; its goals are not checked and
#                                   the manual procedure does not run
#   sudo npm run bench -- --hosts 4 the same on 4 hosts (tensor parallel 4): results-4hosts.json and
#                                   timeline-4hosts.{txt,json,png}
#
# Nothing is written into the tree: docs/performance.md shows the committed bench/*.json, and
# `npm run docs -- --accept $VCL_RESULTS_DIR` publishes a run's (never a smoke's).
#
# Runs `pulumi up` of the `local` stack on the simulated hosts (tests/testbed) side by side with bench/manual.sh,
# the manual procedure, on the same hosts, image and model; see bench/bench.test.ts for what is measured.
set -uo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root" || exit 1

# shellcheck source=../tests/lib/results-dir.sh
source tests/lib/results-dir.sh
out=$VCL_RESULTS_DIR/bench repeats=${VCL_BENCH_REPEATS:-3} n=2 results=results.json smoke=0
while (($#)); do
  case $1 in
    --smoke)
      out=$VCL_RESULTS_DIR/smoke/bench repeats=1 smoke=1
      export VCL_BENCH_SMOKE=1
      ;;
    --hosts)
      n=${2:?--hosts needs a number} results=results-${2}hosts.json
      shift
      ;;
    *) echo "bench: unknown argument $1 (--smoke, --hosts N)" >&2; exit 2 ;;
  esac
  shift
done
export VCL_BENCH_HOSTS=$n
# shellcheck source=../tests/lib/testbed-stage.sh
source tests/lib/testbed-stage.sh
testbed_stage bench "$n" || exit 1

mkdir -p "$out"
echo "bench: $repeats repeat(s), results in $out"
VCL_BENCH_REPEATS=$repeats VCL_BENCH_OUT=$out timeout --foreground $((repeats * 1800 + 600)) \
  npx jest --selectProjects bench --runInBand --ci bench/bench.test.ts || { echo "bench: FAILED: a measured run failed" >&2; exit 1; }

tl=timeline
[[ $n == 2 ]] || tl=timeline-${n}hosts
[[ ! -f $out/timeline-events.jsonl ]] || bash setup/timeline.sh "$out/timeline-events.jsonl" --title "pulumi up of the local stack from empty ($n simulated hosts)" \
  --png "$out/$tl.png" --json "$out/$tl.json" >"$out/$tl.txt" || { echo "bench: FAILED: timeline" >&2; exit 1; }
rm -f "$out/timeline-events.jsonl"
cat "$out/$tl.txt"
echo
node -e '
const r = JSON.parse(require("fs").readFileSync(process.argv[1], "utf8"));
console.log(`bench: ${r.repeats} repeat(s) on ${r.hosts} simulated hosts (min / median / max)`);
for (const [k, f] of Object.entries(r.figures))
  console.log(`  ${k.padEnd(44)} ${[f.min, f.median, f.max].map((v) => String(v).padStart(8)).join(" ")}  ${f.unit}`);
for (const [k, v] of Object.entries(r.ratios)) console.log(`  ${k.padEnd(44)} ${v.toFixed(2).padStart(8)}`);
' "$out/$results"
echo "bench: chart $out/$tl.png"
# the tables of docs/performance.md are generated from the committed results, never pasted
((smoke == 1)) || accept_hint bench

#!/usr/bin/env bash
# stage: image distribution bench (image: chain over the fabric or management vs relay, and the model chain with 1-4 streams, to N hosts on links shaped like the target; bench/distribution.test.ts)
#
#   sudo npm run bench:distribution              N = 1, 2, 4 (5 simulated hosts; relay and the chain over
#                                                management at N = 1 and 4), 512 MiB, management links at
#                                                100 Mbit/s and fabric links at 1 Gbit/s (testbed shape), model
#                                                streams 1, 2, 4 shaped and uncapped, 3 repeats; writes
#                                                $VCL_RESULTS_DIR/bench/distribution.json (about 25 minutes)
#   sudo npm run bench:distribution -- --smoke   N = 1, 2 once with 32 MiB, streams 1 and 4 shaped only, into
#                                                $VCL_RESULTS_DIR/smoke/distribution (npm test)
#   sudo npm run bench:distribution -- -t model  one part (image, image update or model); the others keep their
#                                                last figures (this run's directory's, else the committed ones)
#
# Nothing is written into the tree: docs/performance.md shows the committed bench/distribution.json, and
# `npm run docs -- --accept $VCL_RESULTS_DIR` publishes a run's (never a smoke's).
#
# Env: VCL_DIST_N (e.g. 1,2,4), VCL_DIST_MB (image), VCL_DIST_MODEL_MB (model; default: the image's),
#      VCL_DIST_UPDATE_MB (the image update's new layer: 300; 16 in the smoke),
#      VCL_DIST_MGMT_RATE and VCL_DIST_FABRIC_RATE (tc rates, or off), VCL_DIST_STREAMS (e.g. 1,2,4),
#      VCL_DIST_UNCAPPED (0: no uncapped stream runs), VCL_BENCH_REPEATS.
set -uo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root" || exit 1

# shellcheck source=../tests/lib/results-dir.sh
source tests/lib/results-dir.sh
export VCL_BENCH_OUT=$VCL_RESULTS_DIR/bench VCL_BENCH_REPEATS=${VCL_BENCH_REPEATS:-3} VCL_DIST_N=${VCL_DIST_N:-1,2,4}
smoke=0
if [[ ${1:-} == --smoke ]]; then
  shift
  smoke=1
  VCL_BENCH_OUT=$VCL_RESULTS_DIR/smoke/distribution VCL_BENCH_REPEATS=1 VCL_DIST_N=1,2
  export VCL_DIST_MB=${VCL_DIST_MB:-32} VCL_DIST_STREAMS=${VCL_DIST_STREAMS:-1,4} VCL_DIST_UNCAPPED=${VCL_DIST_UNCAPPED:-0}
  export VCL_DIST_UPDATE_MB=${VCL_DIST_UPDATE_MB:-16}
fi
largest=$(tr ',' '\n' <<<"$VCL_DIST_N" | sort -n | tail -n 1)
# shellcheck source=../tests/lib/testbed-stage.sh
source tests/lib/testbed-stage.sh
testbed_stage distribution $((largest + 1)) || exit 1

mkdir -p "$VCL_BENCH_OUT"
# a run of one part keeps the other parts' last figures: this directory's from an earlier run, else the committed ones
if ((smoke == 0)) && [[ ! -f $VCL_BENCH_OUT/distribution.json ]]; then
  cp bench/distribution.json "$VCL_BENCH_OUT/distribution.json"
fi
echo "distribution: N = $VCL_DIST_N, $VCL_BENCH_REPEATS repeat(s), results in $VCL_BENCH_OUT"
timeout --foreground $((VCL_BENCH_REPEATS * 1800 + 600)) npx jest --selectProjects bench --runInBand --ci bench/distribution.test.ts "$@" ||
  { echo "distribution: FAILED: a measured copy failed" >&2; exit 1; }
((smoke == 1)) || accept_hint distribution

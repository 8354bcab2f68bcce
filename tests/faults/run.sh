#!/usr/bin/env bash
# stage: faults on the simulated hosts through the real Pulumi engine (key, rotation, crash loop, lost hosts)
#
#   sudo npm run test:faults      the suite alone (about 15 minutes); npm test runs it too
#
# Deploys the `local` stack once and breaks one thing per test (tests/faults/faults.test.ts); writes this run's
# results to $VCL_RESULTS_DIR/faults/results.json (never into the tree) and prints the table. docs/faults.md shows
# the committed tests/faults/results.json: `npm run docs -- --accept $VCL_RESULTS_DIR` publishes this run's. Under
# npm test it adopts the serving cluster that the integration suite's backend-ray file hands over (VCL_HANDOFF,
# tests/integration/handoff.ts) instead of deploying its own.
set -uo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
cd "$root" || exit 1

# shellcheck source=../lib/testbed-stage.sh
source tests/lib/testbed-stage.sh
testbed_stage faults 2 || exit 1

# the rows the suite records and jest's own report of the run: tests/faults/report.js makes the run's results.json
# of them
# shellcheck source=../lib/results-dir.sh
source tests/lib/results-dir.sh
out="$VCL_RESULTS_DIR/faults"
rm -rf "$out" && mkdir -p "$out"
VCL_FAULTS_RESULTS="$out/rows.json" timeout --foreground 5400 npx jest --selectProjects faults --runInBand --ci --json \
  --outputFile="$out/jest.json" "$@"
rc=$?
if [[ -s $out/rows.json && -s $out/jest.json ]]; then
  echo
  node tests/faults/report.js "$out/rows.json" "$out/jest.json" "$out/results.json" || rc=1
  accept_hint faults
fi
exit "$rc"

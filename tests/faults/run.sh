#!/usr/bin/env bash
# stage: faults on the simulated hosts through the real Pulumi engine (key, rotation, crash loop, lost hosts)
#
#   sudo npm run test:faults      the suite alone (about 15 minutes); npm test runs it too
#
# Deploys the `local` stack once and breaks one thing per test (tests/faults/faults.test.ts); writes
# tests/faults/results.json and the README's "Faults" table from this run, and prints the table. Under npm test
# it adopts the serving cluster that the integration suite's backend-ray file hands over (VCL_HANDOFF,
# tests/integration/handoff.ts) instead of deploying its own.
set -uo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
cd "$root" || exit 1

# shellcheck source=../lib/testbed-stage.sh
source tests/lib/testbed-stage.sh
testbed_stage faults 2 || exit 1

# the rows the suite records and jest's own report of the run: tests/faults/report.js makes results.json and the
# README's table of them
results="${TMPDIR:-/tmp}/vllm-cluster-faults.json"
report="${TMPDIR:-/tmp}/vllm-cluster-faults-jest.json"
rm -f "$results" "$report"
VCL_FAULTS_RESULTS="$results" timeout --foreground 5400 npx jest --selectProjects faults --runInBand --ci --json --outputFile="$report" "$@"
rc=$?
if [[ -s $results && -s $report ]]; then
  echo
  node tests/faults/report.js "$results" "$report" || rc=1
fi
exit "$rc"

#!/usr/bin/env bash
# stage: faults on the simulated hosts through the real Pulumi engine (key, rotation, crash loop, lost hosts)
#
#   sudo npm run test:faults      (about 20 minutes; not part of npm test, to keep it within its time budget)
#
# Deploys the `local` stack once and breaks one thing per test (tests/faults/faults.test.ts); prints the table of
# fault, expected and observed that the README's "Faults" section shows.
set -uo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
cd "$root" || exit 1

# shellcheck source=../lib/testbed-stage.sh
source tests/lib/testbed-stage.sh
testbed_stage faults 2 || exit 1

results="${TMPDIR:-/tmp}/vllm-cluster-faults.json"
rm -f "$results"
VCL_FAULTS_RESULTS="$results" timeout 5400 npx jest --selectProjects faults --runInBand --ci "$@"
rc=$?
if [[ -s $results ]]; then
  echo
  echo "| Fault | Expected | Observed | s |"
  echo "| --- | --- | --- | --- |"
  node -e 'for (const r of JSON.parse(require("fs").readFileSync(process.argv[1], "utf8"))) console.log(`| ${r.fault} | ${r.expected} | ${r.observed} | ${r.seconds} |`);' "$results"
fi
exit "$rc"

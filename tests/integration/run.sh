#!/usr/bin/env bash
# stage: integration on simulated hosts (program's own builders and image provider; direct driver, not Pulumi)
#
# Deploys the `local` stack (spark-1 head, spark-2 worker) onto the simulated hosts with the DIRECT DRIVER
# (tests/integration/direct.ts), which stands in for the Pulumi engine and the provider plugins that cannot be
# built on this machine. Every command and container comes from the program's own builders; the image moves
# through the program's own ImagePresence provider. See tests/integration/cluster.test.ts for what is checked.
#
#   sudo bash tests/integration/run.sh        (needs root for the testbed; exit 77 = cannot run here)
#
# The testbed is brought up with at least 2 hosts and never shrunk (an `up 2` would stop hosts 3+ that other
# tests may be using) nor taken down here.
set -uo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
cd "$root" || exit 1

if [[ $(id -u) != 0 ]]; then
  echo "integration: BLOCKED: the simulated hosts need root (network namespaces, dockerd per host)" >&2
  exit 77
fi
if [[ ! -d node_modules ]]; then
  npm ci --no-audit --no-fund || exit 1
fi

# Keep every host that is already up; make sure there are at least 2.
existing=$(ip netns list 2>/dev/null | awk '{print $1}' | sed -n 's/^vcl-h\([0-9][0-9]*\)$/\1/p' | sort -n | tail -n 1)
hosts=$((${existing:-0} > 2 ? existing : 2))
echo "integration: testbed up $hosts"
if ! timeout 1800 tests/testbed/testbed up "$hosts"; then
  echo "integration: FAILED: testbed up $hosts did not finish (see its output above)" >&2
  exit 1
fi

timings="${TMPDIR:-/tmp}/vllm-cluster-integration-timings.json"
rm -f "$timings"
start=$SECONDS
VCL_INTEGRATION_TIMINGS="$timings" timeout 2400 npx jest --selectProjects integration --runInBand --ci
rc=$?
echo
echo "integration (direct driver, not Pulumi): jest exit $rc after $((SECONDS - start))s"
if [[ -s $timings ]]; then
  echo "measured seconds:"
  node -e 'for (const [k, v] of Object.entries(JSON.parse(require("fs").readFileSync(process.argv[1], "utf8")))) console.log(`  ${k.padEnd(32)} ${v}`);' "$timings"
fi
exit "$rc"

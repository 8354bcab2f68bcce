#!/usr/bin/env bash
# stage: integration on the simulated hosts through the real Pulumi engine
#
# Deploys the `local` (Ray) and `local-native` stacks onto the simulated hosts spark-1 and spark-2 with the real
# Pulumi CLI, language host and provider plugins (setup/toolchain.sh), driven from jest through Pulumi's Automation
# API; see tests/integration/*.test.ts for what is checked. Needs root (the testbed). The testbed is brought up
# with at least 2 hosts and never shrunk (an `up 2` would stop hosts 3+ that other tests may be using).
#
#   sudo bash tests/integration/run.sh           every file
#   sudo bash tests/integration/run.sh ray       the backend-ray file only (cluster.test.ts); under npm test
#                                                (VCL_HANDOFF set) it hands its serving cluster to the fault suite
#   sudo bash tests/integration/run.sh others    every other file but the Docker 28 cluster, the upgrade and the image
#                                                build with scale (native, the chain agent, discovery, the Hub
#                                                download, chain faults)
#   sudo bash tests/integration/run.sh build-scale  image.build, then a third host added and removed on the same
#                                                cluster (imageBuild.test.ts; npm run test:build-scale): not in npm
#                                                test, whose 90 minutes it would pass on the slower 2-core machines
#   sudo bash tests/integration/run.sh side      backend native and the Hub download (native, hubModel) on hosts 3
#                                                and 4 (VCL_IT_HOSTS, default 3,4: each stack moved onto them, the
#                                                image loaded onto host 3 first), so that they can run beside a part
#                                                on hosts 1 and 2 (on 2 cores that was measured no faster)
#   sudo bash tests/integration/run.sh upgrade   the upgrade from the release before VllmCluster (upgrade.test.ts;
#                                                npm run test:upgrade): not in npm test, for its 90 minutes
#   sudo bash tests/integration/run.sh two-clusters   two stacks serving from the same two hosts at once
#                                                (twoClusters.test.ts; npm run test:two-clusters): not in npm test
#   sudo bash tests/integration/run.sh engines   the Docker 28 cluster (engines.test.ts; npm run test:engines): not in
#                                                npm test, whose 90 minutes it would pass on the slower 2-core
#                                                machines (docs/testing.md#how-long)
#
# Other arguments go to jest.
set -uo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
cd "$root" || exit 1

# shellcheck source=../lib/testbed-stage.sh
source tests/lib/testbed-stage.sh
part=all
case ${1:-} in
  ray) part=ray; shift; set -- "$@" tests/integration/cluster.test.ts ;;
  others) part=others; shift; set -- "$@" --testPathIgnorePatterns tests/integration/cluster.test.ts tests/integration/engines.test.ts tests/integration/upgrade.test.ts tests/integration/twoClusters.test.ts tests/integration/imageBuild.test.ts ;;
  build-scale) part=build-scale; shift; set -- "$@" tests/integration/imageBuild.test.ts ;;
  side) part=side; shift; set -- "$@" tests/integration/native.test.ts tests/integration/hubModel.test.ts ;;
  upgrade) part=upgrade; shift; set -- "$@" tests/integration/upgrade.test.ts ;;
  engines) part=engines; shift; set -- "$@" tests/integration/engines.test.ts ;;
  two-clusters) part=two-clusters; shift; set -- "$@" tests/integration/twoClusters.test.ts ;;
esac

if [[ $part == side ]]; then
  export VCL_IT_HOSTS=${VCL_IT_HOSTS:-3,4}
  IFS=, read -r -a side_hosts <<<"$VCL_IT_HOSTS"
  wanted=0
  for h in "${side_hosts[@]}"; do ((h > wanted)) && wanted=$h; done
  testbed_stage integration "$wanted" || exit 1
  # the stacks' image source is their first node, here host ${side_hosts[0]}: the testbed loads the image only onto host 1
  timeout --foreground 1200 tests/testbed/testbed image --on "${side_hosts[0]}" >/dev/null ||
    { echo "integration ($part): FAILED: testbed image --on ${side_hosts[0]}" >&2; exit 1; }
else
  testbed_stage integration 2 || exit 1
fi

# the monitoring test looks at Prometheus's graph in headless Chromium (backend ray's file)
if [[ $part == ray || $part == all ]]; then
  timeout --foreground 1500 tests/testbed/testbed packages --browser ||
    { echo "integration ($part): FAILED: installing chromium (testbed packages --browser)" >&2; exit 1; }
fi

# one file per part: `side` may run beside another part
timings="${TMPDIR:-/tmp}/vllm-cluster-integration-timings-$part.json"
rm -f "$timings"
start=$SECONDS
results="${VCL_RESULTS_DIR:-${TMPDIR:-/tmp}/vllm-cluster-results}"
mkdir -p "$results"
VCL_INTEGRATION_TIMINGS="$timings" timeout --foreground 5400 npx jest --selectProjects integration --runInBand --ci \
  --json --outputFile="$results/integration-$part.json" "$@"
rc=$?
echo
echo "integration ($part; real Pulumi engine): jest exit $rc after $((SECONDS - start))s"
if [[ -s $timings ]]; then
  echo "measured seconds:"
  node -e 'for (const [k, v] of Object.entries(JSON.parse(require("fs").readFileSync(process.argv[1], "utf8")))) console.log(`  ${k.padEnd(40)} ${v}`);' "$timings"
fi
exit "$rc"

#!/usr/bin/env bash
# stage: policy pack through the real CLI (local stack passes, bad fixture fails)
#
# `pulumi preview --policy-pack policies` with the real CLI: the `local` stack must pass every mandatory policy;
# the deliberately bad fixture (tests/policy/fixtures/Pulumi.policy-bad.yaml: GPU memory utilization 0.93 on a
# unified-memory host, Ray without auth, a tag-only image) must fail naming gpu-memory-utilization and
# ray-token-auth, and warn with image-pinned.
# Runs with the toolchain from setup/toolchain.sh (Node language host and provider plugins: a preview calls the
# providers' Check before the pack sees a resource).
set -uo pipefail
REPO_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
cd "$REPO_ROOT" || exit 1

# shellcheck source=../../setup/env.sh
source setup/env.sh 2>/dev/null || { echo "FAIL - setup/toolchain.sh could not provide the toolchain"; exit 1; }
timeout --foreground 1200 tests/testbed/testbed up 2 >/dev/null || { echo "FAIL - testbed up 2"; exit 1; }
WORK=$(mktemp -d "${TMPDIR:-/tmp}/vcl-policy.XXXXXX")
trap 'rm -rf "$WORK"' EXIT
export PULUMI_BACKEND_URL="file://$WORK/state" PULUMI_CONFIG_PASSPHRASE="vllm-cluster-local-simulated-only" # the local stack file carries its salt
mkdir -p "$WORK/state" "$WORK/project"
# A copy of the project, so `pulumi stack init` writes no stack file into the repository.
cp -r Pulumi.yaml package.json tsconfig.json infra components stacks policies "$WORK/project/"
ln -s "$REPO_ROOT/node_modules" "$WORK/project/node_modules"
cp tests/policy/fixtures/Pulumi.policy-bad.yaml "$WORK/project/stacks/"
cd "$WORK/project" || exit 1

# shellcheck source=../lib/results.sh
source "$REPO_ROOT/tests/lib/results.sh"

pulumi stack init local --non-interactive >"$WORK/init-local.log" 2>&1 || { cat "$WORK/init-local.log"; fail "stack init local"; }
if timeout --foreground 900 pulumi preview --stack local --policy-pack policies --non-interactive --color never >"$WORK/local.log" 2>&1; then
  pass "local stack: preview with the policy pack passes"
else
  tail -n 30 "$WORK/local.log"; fail "local stack: preview with the policy pack passes"
fi

pulumi stack init policy-bad --non-interactive >/dev/null 2>&1
if timeout --foreground 900 pulumi preview --stack policy-bad --policy-pack policies --non-interactive --color never >"$WORK/bad.log" 2>&1; then
  fail "bad fixture: preview must fail"
else
  pass "bad fixture: preview fails"
fi
grep -q "gpu-memory-utilization" "$WORK/bad.log" && grep -qi "mandatory" "$WORK/bad.log" &&
  pass "bad fixture: the mandatory gpu-memory-utilization violation is listed by name" ||
  fail "bad fixture: gpu-memory-utilization named as a mandatory violation"
grep -q "image-pinned" "$WORK/bad.log" && pass "bad fixture: image-pinned advisory listed" || fail "bad fixture: image-pinned advisory listed"
grep -q "ray-token-auth" "$WORK/bad.log" && pass "bad fixture: ray-token-auth (mandatory) listed" || fail "bad fixture: ray-token-auth (mandatory) listed"

finish

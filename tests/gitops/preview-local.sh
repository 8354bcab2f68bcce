#!/usr/bin/env bash
# stage: GitOps preview script against the local stack on the simulated hosts
#
# Runs setup/gitops/preview.sh exactly as the pull-request workflow does, against the `local` stack on the
# simulated hosts, with a throwaway state backend. Checks the script's own behaviour for real (usage errors,
# the markdown it writes for the pull-request comment, exit code propagation); the preview itself must pass when
# the toolchain is complete (setup/toolchain.sh provides it).
set -uo pipefail
REPO_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
cd "$REPO_ROOT" || exit 1
# shellcheck source=../lib/results.sh
source "$REPO_ROOT/tests/lib/results.sh"

WORK=$(mktemp -d "${TMPDIR:-/tmp}/vcl-gitops.XXXXXX")
trap 'rm -rf "$WORK"' EXIT
export PULUMI_BACKEND_URL="file://$WORK/state" PULUMI_CONFIG_PASSPHRASE="vllm-cluster-local-simulated-only"
mkdir -p "$WORK/state"

bash setup/gitops/preview.sh no-such-stack >"$WORK/usage.log" 2>&1
rc=$?
((rc == 2)) && grep -q "no stack file stacks/Pulumi.no-such-stack.yaml" "$WORK/usage.log" &&
  pass "unknown stack: exit 2 naming the missing stack file" || fail "unknown stack: exit 2 naming the missing stack file (got $rc)"

timeout --foreground 1200 tests/testbed/testbed up 2 >"$WORK/testbed.log" 2>&1 || { tail -n 20 "$WORK/testbed.log"; fail "testbed up 2"; }
before=$(git status --porcelain)
timeout --foreground 900 bash setup/gitops/preview.sh local "$WORK/preview.md" >"$WORK/preview.log" 2>&1
rc=$?
[[ "$(git status --porcelain)" == "$before" ]] && pass "the preview leaves the repository tree unchanged" || fail "the preview changed the repository tree"
head -n 1 "$WORK/preview.md" 2>/dev/null | grep -qx '<!-- vllm-cluster-preview:local -->' &&
  pass "pull-request comment written with its per-stack marker" || fail "pull-request comment written with its per-stack marker"
grep -q "PULUMI_CONFIG_PASSPHRASE\|$PULUMI_CONFIG_PASSPHRASE" "$WORK/preview.md" "$WORK/preview.log" &&
  fail "the passphrase appears in the preview output" || pass "no secret in the preview output or comment"

((rc == 0)) && grep -q "passed" "$WORK/preview.md" && pass "local stack: preview with policies passes" ||
  { tail -n 30 "$WORK/preview.log"; fail "local stack: preview with policies passes (exit $rc)"; }

# A failing preview (an invalid stack config) propagates its exit code, and the comment says FAILED with the cause.
# Run on a copy of the tracked files, so the repository's stack file is never edited.
mkdir -p "$WORK/repo"
git ls-files -z | xargs -0 cp --parents -t "$WORK/repo"
ln -s "$REPO_ROOT/node_modules" "$WORK/repo/node_modules"
sed -i 's/tensorParallelSize: 2/tensorParallelSize: 4/' "$WORK/repo/stacks/Pulumi.local.yaml"
timeout --foreground 900 bash "$WORK/repo/setup/gitops/preview.sh" local "$WORK/bad.md" >"$WORK/bad.log" 2>&1
rc=$?
((rc != 0)) && grep -q "FAILED (exit $rc)" "$WORK/bad.md" && grep -q "serve.tensorParallelSize" "$WORK/bad.md" &&
  pass "a failing preview propagates its exit code ($rc) and the comment says FAILED naming the key" ||
  { tail -n 20 "$WORK/bad.log"; fail "a failing preview propagates its exit code and the comment says FAILED naming the key"; }
[[ "$(git status --porcelain)" == "$before" ]] && pass "the repository tree is unchanged afterwards" || fail "the repository tree changed"
finish

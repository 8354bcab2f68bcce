#!/usr/bin/env bash
# stage: GitOps preview script against the local stack on the simulated hosts
#
# Runs setup/gitops/preview.sh exactly as the pull-request workflow does, against the `local` stack on the
# simulated hosts, with a throwaway state backend. Checks the script's own behaviour for real (usage errors,
# the markdown it writes for the pull-request comment, exit code propagation); the preview itself must pass when
# the toolchain is complete. Where the provider plugins cannot be provided (setup/toolchain.sh --check), the
# preview cannot pass: the plumbing checks still run, and the stage exits 77 (BLOCKED) instead of passing.
set -uo pipefail
REPO_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
cd "$REPO_ROOT" || exit 1
passed=0 failed=0
ok() { passed=$((passed + 1)); echo "ok   - $*"; }
bad() { failed=$((failed + 1)); echo "FAIL - $*"; }

WORK=$(mktemp -d "${TMPDIR:-/tmp}/vcl-gitops.XXXXXX")
trap 'rm -rf "$WORK"' EXIT
export PULUMI_BACKEND_URL="file://$WORK/state" PULUMI_CONFIG_PASSPHRASE="vllm-cluster-local-simulated-only"
mkdir -p "$WORK/state"

complete=1
bash setup/toolchain.sh --check >/dev/null 2>&1 || complete=0

bash setup/gitops/preview.sh no-such-stack >"$WORK/usage.log" 2>&1
rc=$?
((rc == 2)) && grep -q "no stack file stacks/Pulumi.no-such-stack.yaml" "$WORK/usage.log" &&
  ok "unknown stack: exit 2 naming the missing stack file" || bad "unknown stack: exit 2 naming the missing stack file (got $rc)"

timeout 1200 tests/testbed/testbed up 2 >"$WORK/testbed.log" 2>&1 || { tail -n 20 "$WORK/testbed.log"; bad "testbed up 2"; }
before=$(git status --porcelain)
timeout 900 bash setup/gitops/preview.sh local "$WORK/preview.md" >"$WORK/preview.log" 2>&1
rc=$?
[[ "$(git status --porcelain)" == "$before" ]] && ok "the preview leaves the repository tree unchanged" || bad "the preview changed the repository tree"
head -n 1 "$WORK/preview.md" 2>/dev/null | grep -qx '<!-- vllm-cluster-preview:local -->' &&
  ok "pull-request comment written with its per-stack marker" || bad "pull-request comment written with its per-stack marker"
grep -q "PULUMI_CONFIG_PASSPHRASE\|$PULUMI_CONFIG_PASSPHRASE" "$WORK/preview.md" "$WORK/preview.log" &&
  bad "the passphrase appears in the preview output" || ok "no secret in the preview output or comment"

if ((complete == 1)); then
  ((rc == 0)) && grep -q "passed" "$WORK/preview.md" && ok "local stack: preview with policies passes" ||
    { tail -n 30 "$WORK/preview.log"; bad "local stack: preview with policies passes (exit $rc)"; }
  echo "$passed passed, $failed failed"
  ((failed == 0))
  exit $?
fi

((rc != 0)) && grep -q "FAILED (exit $rc)" "$WORK/preview.md" && grep -q "error:" "$WORK/preview.md" &&
  ok "a failing preview propagates its exit code ($rc) and the comment says FAILED with the cause" ||
  bad "a failing preview propagates its exit code and the comment says FAILED"
echo "$passed passed, $failed failed, 1 skipped"
echo "BLOCKED: the local stack's preview cannot pass without the provider plugins and a Node language host that runs policy packs (bash setup/toolchain.sh --check)"
((failed == 0)) || exit 1
exit 77

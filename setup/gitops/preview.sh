#!/usr/bin/env bash
# Preview one stack exactly as a pull request sees it: the diff of every resource and the policy pack's verdict.
# Usage: setup/gitops/preview.sh <stack> [markdown-out]
# Exit code is pulumi's: non-zero when the program fails (bad config names the key) or a mandatory policy fails.
# Secrets stay secret: Pulumi masks secret values in the diff, and nothing here echoes the environment.
set -euo pipefail
stack=${1:?usage: preview.sh <stack> [markdown-out]}
out=${2:-}
# shellcheck source=lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
gitops_select_stack preview "$stack"
log=$(mktemp)
trap 'rm -f "$log"' EXIT
set +e
pulumi preview --stack "$stack" --diff --policy-pack policies --non-interactive --color never 2>&1 | tee "$log"
rc=${PIPESTATUS[0]}
set -e

if [[ -n "$out" ]]; then
  {
    echo "<!-- vllm-cluster-preview:$stack -->"
    if [[ $rc -eq 0 ]]; then echo "### \`pulumi preview\` of stack \`$stack\`: passed"; else echo "### \`pulumi preview\` of stack \`$stack\`: FAILED (exit $rc)"; fi
    echo
    echo '```diff'
    # GitHub comments are limited to 65536 characters; keep the tail, where the summary and policy verdicts are.
    tail -c 60000 "$log"
    echo '```'
  } >"$out"
fi
exit "$rc"

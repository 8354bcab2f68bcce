#!/usr/bin/env bash
# Preview one stack exactly as a pull request sees it: the diff of every resource and the policy pack's verdict.
# Usage: setup/gitops/preview.sh <stack> [markdown-out]
# Exit code is pulumi's: non-zero when the program fails (bad config names the key) or a mandatory policy fails.
# Secrets stay secret: Pulumi masks secret values in the diff, and nothing here echoes the environment.
# Needs the state backend and the config passphrase only: a preview opens no ssh connection, so no deploy key.
# GITOPS_SSH_DIR, when set, names the directory the deploy job keeps its key in, so the preview computes the same
# ssh options the deploy records (see gitops_config_file in lib.sh); no file there is read.
set -euo pipefail
stack=${1:?usage: preview.sh <stack> [markdown-out]}
out=${2:-}
# shellcheck source=lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
gitops_select_stack preview "$stack"
gitops_config_file preview "$stack"
log=$(mktemp)
trap 'rm -f "$log"; [[ -z "$GITOPS_CONFIG_TMP" ]] || rm -rf "$GITOPS_CONFIG_TMP"' EXIT
set +e
pulumi preview --stack "$stack" "${GITOPS_CONFIG_ARGS[@]}" --diff --policy-pack policies --non-interactive --color never 2>&1 | tee "$log"
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

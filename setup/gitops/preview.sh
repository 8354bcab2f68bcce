#!/usr/bin/env bash
# Preview one stack exactly as a pull request sees it: the diff of every resource and the policy pack's verdict.
# Usage: setup/gitops/preview.sh <stack> [markdown-out]
# Exit code is pulumi's: non-zero when the program fails (bad config names the key) or a mandatory policy fails.
# Secrets stay secret: Pulumi masks secret values in the diff, and nothing here echoes the environment. The job log
# shows pulumi's own output (GitHub masks the job's secrets there); the pull-request comment (markdown-out) is made
# from the preview's summary and diff only (setup/gitops/preview-comment.js reads the engine's event log), with every
# secret value this job knows replaced: a comment is never masked.
# Needs the state backend and the config passphrase only: a preview opens no ssh connection, so no deploy key.
# GITOPS_SSH_DIR, when set, names the directory the deploy job keeps its key in, so the preview computes the same
# ssh options the deploy records (see gitops_config_file in lib.sh); no file there is read.
set -euo pipefail
stack=${1:?usage: preview.sh <stack> [markdown-out]}
out=${2:-}
# The environment's secrets (the workflows' secrets.* it may be given), replaced in the comment by their values.
SECRET_ENV=(PULUMI_CONFIG_PASSPHRASE PULUMI_ACCESS_TOKEN PULUMI_BACKEND_URL AWS_ACCESS_KEY_ID AWS_SECRET_ACCESS_KEY SSH_PRIVATE_KEY)
# shellcheck source=lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
gitops_select_stack preview "$stack"
gitops_config_file preview "$stack"
work=$(mktemp -d)
trap 'rm -rf "$work"; [[ -z "$GITOPS_CONFIG_TMP" ]] || rm -rf "$GITOPS_CONFIG_TMP"' EXIT
set +e
# --event-log (the engine's events as JSON, what the comment is made from) is offered with PULUMI_DEBUG_COMMANDS only
PULUMI_DEBUG_COMMANDS=true pulumi preview --stack "$stack" "${GITOPS_CONFIG_ARGS[@]}" --diff --policy-pack policies \
  --non-interactive --color never --event-log "$work/events.jsonl" 2>&1
rc=$?
set -e

if [[ -n "$out" ]]; then
  secret_args=()
  for name in "${SECRET_ENV[@]}"; do secret_args+=(--secret-env "$name"); done
  # the stack's secret config, decrypted for the comment's redaction only (kept in memory and a pipe, never on disk)
  config=$(pulumi config --show-secrets --json --stack "$stack" "${GITOPS_CONFIG_ARGS[@]}" 2>/dev/null) || config='{}'
  printf '%s' "$config" |
    node setup/gitops/preview-comment.js --stack "$stack" --exit "$rc" --events "$work/events.jsonl" \
      --stack-file "stacks/Pulumi.$stack.yaml" "${secret_args[@]}" >"$out"
  unset config
fi
exit "$rc"

#!/usr/bin/env bash
# Apply one stack after merge: refresh first (so drift such as a dead container is healed), enforce the same policy
# pack as the preview, and never prompt. The deploy workflow runs it under setup/gitops/ssh-setup.sh, which hands it
# the deploy key's directory in GITOPS_SSH_DIR (see gitops_config_file in lib.sh); by hand it uses the stack file's
# own ssh paths.
# Usage: setup/gitops/up.sh <stack>
set -euo pipefail
stack=${1:?usage: up.sh <stack>}
# shellcheck source=lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
gitops_select_stack up "$stack"
gitops_config_file up "$stack"
trap '[[ -z "$GITOPS_CONFIG_TMP" ]] || rm -rf "$GITOPS_CONFIG_TMP"' EXIT
pulumi up --stack "$stack" "${GITOPS_CONFIG_ARGS[@]}" --yes --refresh --diff --policy-pack policies --non-interactive --color never

#!/usr/bin/env bash
# Apply one stack after merge: refresh first (so drift such as a dead container is healed), enforce the same policy
# pack as the preview, and never prompt.
# Usage: setup/gitops/up.sh <stack>
set -euo pipefail
stack=${1:?usage: up.sh <stack>}
# shellcheck source=lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
gitops_select_stack up "$stack"
pulumi up --stack "$stack" --yes --refresh --diff --policy-pack policies --non-interactive --color never

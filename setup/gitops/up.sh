#!/usr/bin/env bash
# Apply one stack after merge: refresh first (so drift such as a dead container is healed), enforce the same policy
# pack as the preview, and never prompt.
# Usage: setup/gitops/up.sh <stack>
set -euo pipefail
stack=${1:?usage: up.sh <stack>}
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
# shellcheck source=../env.sh
source "$root/setup/env.sh"
cd "$root"

if [[ ! -f "stacks/Pulumi.$stack.yaml" ]]; then
  echo "up: no stack file stacks/Pulumi.$stack.yaml" >&2
  exit 2
fi
[[ -d node_modules ]] || npm ci --no-audit --no-fund

pulumi stack select "$stack" --create --non-interactive >/dev/null
pulumi up --stack "$stack" --yes --refresh --diff --policy-pack policies --non-interactive --color never

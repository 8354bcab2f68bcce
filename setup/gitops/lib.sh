# shellcheck shell=bash
# Shared by preview.sh and up.sh: the toolchain on PATH, the repository root as working directory, the stack file
# checked (exit 2 naming it), npm packages present, and the stack selected (created in the backend if new).

gitops_select_stack() { # <script name> <stack>
  local who="$1" stack="$2" root
  root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
  # shellcheck source=../env.sh
  source "$root/setup/env.sh"
  cd "$root" || exit 1
  if [[ ! -f "stacks/Pulumi.$stack.yaml" ]]; then
    echo "$who: no stack file stacks/Pulumi.$stack.yaml" >&2
    exit 2
  fi
  [[ -d node_modules ]] || npm ci --no-audit --no-fund
  pulumi stack select "$stack" --create --non-interactive >/dev/null
}

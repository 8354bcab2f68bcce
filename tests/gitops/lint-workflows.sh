#!/usr/bin/env bash
# Lint the GitHub Actions workflows with actionlint, built from the Go module proxy once and cached by version
# outside the repository. shellcheck, when installed, checks the workflows' run: scripts too.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
version=v1.7.12
bin_dir="${XDG_CACHE_HOME:-$HOME/.cache}/vllm-cluster/tools/actionlint-$version"
if [[ ! -x "$bin_dir/actionlint" ]]; then
  echo "lint-workflows: building actionlint $version (once)"
  mkdir -p "$bin_dir"
  (cd "$(mktemp -d)" && GOBIN="$bin_dir" GOFLAGS=-mod=mod go install "github.com/rhysd/actionlint/cmd/actionlint@$version")
fi
cd "$root"
"$bin_dir/actionlint" -color=false
echo "lint-workflows: $(ls .github/workflows/*.yml | wc -l) workflow(s) pass actionlint $version"

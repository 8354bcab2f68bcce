#!/usr/bin/env bash
# stage: TypeScript component packages from Python and YAML programs (real CLI, language hosts from source)
#
# Builds (once; cached like the rest of the toolchain) the Python and YAML language hosts with
# setup/toolchain.sh --languages python,yaml, then runs tests/languages/*.test.ts: a tiny component package
# (tests/fixtures/languages/component) added with `pulumi package add` to a Python and a YAML program, each
# previewed, deployed, deployed again without changes and destroyed on a throwaway file backend; and the
# project's own package (package/, VllmCluster) added to examples/python and examples/yaml, each previewed
# (the plan, and bad arguments refused), never deployed. Needs no root and no simulated hosts; the first run also
# fills a wheel folder from PyPI (about 13 MB) in the user cache.
#
#   bash tests/languages/run.sh [jest arguments]
set -uo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
cd "$root" || exit 1

start=$SECONDS
if ! toolchain_env="$(bash setup/toolchain.sh --languages python,yaml --print-env)"; then
  echo "languages: setup/toolchain.sh --languages python,yaml could not provide the language hosts (see above)" >&2
  exit 1
fi
eval "$toolchain_env"
echo "languages: toolchain ready after $((SECONDS - start))s"

results="${VCL_RESULTS_DIR:-${TMPDIR:-/tmp}/vllm-cluster-results}"
mkdir -p "$results"
timeout --foreground 1200 npx jest --selectProjects languages --runInBand --ci --json --outputFile="$results/languages.json" "$@"
rc=$?
echo "languages: jest exit $rc after $((SECONDS - start))s"
exit "$rc"

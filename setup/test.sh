#!/usr/bin/env bash
# The project's whole test suite, installing what it needs: npm packages, the Pulumi toolchain (built once from
# pinned source archives into the user cache), Docker and sshd from Debian's packages, the simulated hosts, their
# image (real Ray and vLLM's CPU build) and the tiny model.
#
#   npm test                  everything (what CI runs); needs root for the simulated hosts
#   npm test -- --fast        static checks and unit/policy tests only (no root, no hosts)
#
# Stages run in order; every stage runs for real and either passes or fails. Ends with one line
# "N passed, N failed" counting stages. The Pulumi source archives come from --sources DIR, VCL_PULUMI_SOURCES,
# or ../shared/pulumi-sources (setup/toolchain.sh looks next to the repository and next to its local origin).
set -uo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root" || exit 1
fast=0
while (($# > 0)); do
  case "$1" in
    --fast) fast=1 ;;
    --sources) export VCL_PULUMI_SOURCES="${2:?--sources needs a directory}"; shift ;;
    *) echo "usage: npm test [-- --fast] [-- --sources DIR]" >&2; exit 64 ;;
  esac
  shift
done

passed=0 failed=0
declare -a summary=()
t_all=$SECONDS

stage() { # name command...
  local name="$1"; shift
  local start=$SECONDS
  echo
  echo "=== stage: $name ($(date +%H:%M:%S))"
  "$@"
  local rc=$?
  local took=$((SECONDS - start))
  if ((rc == 0)); then
    passed=$((passed + 1)); summary+=("PASS    $name (${took}s)")
  else
    failed=$((failed + 1)); summary+=("FAIL    $name (${took}s, exit $rc)")
  fi
  return "$rc"
}

install_npm() {
  # A fresh clone (CI) installs exactly the lock file; a warm tree reuses node_modules.
  if [[ ! -d node_modules || package-lock.json -nt node_modules/.package-lock.json ]]; then
    npm ci --no-audit --no-fund
  fi
}

static_checks() {
  npm run --silent build && npm run --silent lint && bash tests/gitops/lint-workflows.sh || return 1
  if ! command -v shellcheck >/dev/null && [[ $(id -u) == 0 ]]; then
    (apt-get install -y -qq shellcheck >/dev/null 2>&1 || { apt-get update -qq >/dev/null 2>&1 && apt-get install -y -qq shellcheck >/dev/null 2>&1; }) || true
  fi
  command -v shellcheck >/dev/null || { echo "shellcheck: not installed and could not be installed"; return 1; }
  # every shell script, the host scripts of infra/scripts (.sh and .bash) included
  mapfile -t scripts < <(git ls-files '*.sh' '*.bash' setup tests bench | grep -E '\.(sh|bash)$|/testbed$' | sort -u)
  shellcheck -S warning "${scripts[@]}" && echo "shellcheck: ${#scripts[@]} scripts clean"
}

# Each jest run also writes its results where the Security table's generator reads them (tests/security/report.js).
export VCL_RESULTS_DIR="${VCL_RESULTS_DIR:-${TMPDIR:-/tmp}/vllm-cluster-results}"
rm -rf "$VCL_RESULTS_DIR" && mkdir -p "$VCL_RESULTS_DIR"

# A stage that runs SCRIPT [ARGS...], named by the script's "# stage:" line plus SUFFIX. A script that was renamed or
# removed fails here under its path: it never drops out of the run and the count.
script_stage() { # script suffix args...
  local t=$1 suffix=${2:-} name
  shift 2 || shift
  name=$(sed -n 's/^# stage: //p' "$t" 2>/dev/null | head -n 1 | grep .) || name="$t (missing or without a '# stage:' line)"
  stage "$name$suffix" bash "$t" "$@"
}

unit_tests() {
  # two workers on the two cores: nothing else runs during this stage
  npx jest --ci --selectProjects unit policy -w 2 --json --outputFile="$VCL_RESULTS_DIR/unit.json"
}

toolchain() {
  bash setup/toolchain.sh && bash tests/toolchain/lifecycle.sh
}

# The simulated hosts are machine-wide: a running demo (npm run demo) uses the same hosts and container names.
# Never tear it down from under its owner: refuse and say how to stop it.
demo_guard() {
  local marker="${VCL_TESTBED_DIR:-/var/lib/vllm-cluster-testbed}/demo"
  if [[ -f "$marker" ]] && ip netns list 2>/dev/null | grep -q '^vcl-h1\b'; then
    echo "npm test: the demo is running on the simulated hosts (started from $(cat "$marker")); the tests would" >&2
    echo "replace its containers and remove its hosts. Stop it first: npm run demo -- down   (in $(cat "$marker"))" >&2
    return 1
  fi
}

if ((fast == 0)); then
  # Before anything is downloaded: can this CPU run the test image (x86-64 with AVX2, FMA, F16C)?
  if ! cpu=$(tests/testbed/testbed cpu); then
    echo "npm test: $cpu" >&2
    exit 1
  fi
  echo "npm test: $cpu"
fi
stage "install npm packages" install_npm || exit 1
stage "static checks (tsc --strict, eslint, prettier, actionlint, shellcheck)" static_checks
stage "unit and policy tests (jest, Pulumi mocks)" unit_tests
if ((fast == 0)); then
  if [[ $(id -u) != 0 ]]; then
    echo "npm test: the full suite needs root (network namespaces, one Docker engine per simulated host);" >&2
    echo "run it as root, or npm test -- --fast for static checks and unit tests" >&2
    exit 1
  fi
  demo_guard || exit 1
  mkdir -p "${VCL_TESTBED_DIR:-/var/lib/vllm-cluster-testbed}"
  echo "$$" >"${VCL_TESTBED_DIR:-/var/lib/vllm-cluster-testbed}/tests-running"
  trap 'rm -f "${VCL_TESTBED_DIR:-/var/lib/vllm-cluster-testbed}/tests-running"' EXIT
  stage "Pulumi toolchain from pinned sources (real CLI lifecycle with all three providers)" toolchain
  # The self-test runs inside the terminal stage: the first run's steps as a person meets them, in a terminal
  script_stage tests/testbed/terminal.sh
  # The backend-ray integration file hands its serving `local` cluster to the fault suite, which adopts it instead
  # of a cold up of its own and destroys it at its end (tests/integration/handoff.ts).
  export VCL_HANDOFF="$VCL_RESULTS_DIR/local-stack.handoff"
  script_stage tests/integration/run.sh ": backend ray (its serving cluster goes on to the fault suite)" ray
  script_stage tests/faults/run.sh
  script_stage tests/integration/run.sh ": backend native, a third host, the chain agent" others
  for t in tests/e2e/run.sh tests/e2e/policy.sh tests/gitops/preview-local.sh; do
    script_stage "$t"
  done
  script_stage bench/run.sh "" --smoke
  script_stage bench/distribution.sh "" --smoke
  stage "README Security table from this run's test results (tests/security/results.json)" \
    node tests/security/report.js "$VCL_RESULTS_DIR"
  stage "where the time went, per test file (tests/lib/timings-report.js)" \
    node tests/lib/timings-report.js "$VCL_RESULTS_DIR" "${TMPDIR:-/tmp}/vllm-cluster-faults-jest.json"
  stage "tear down the simulated hosts and the machine engine (and check nothing is left)" \
    tests/testbed/testbed down --machine-engine
fi

echo
echo "=== summary ($((SECONDS - t_all))s)"
printf '  %s\n' "${summary[@]}"
echo "$passed passed, $failed failed"
((failed == 0))

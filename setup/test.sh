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
#
# Every stage writes its results under $VCL_RESULTS_DIR (default: a new ${TMPDIR:-/tmp}/vllm-cluster-results/run-*
# for each run), never into the tree; the last stage checks that the tree is as the run found it. The run's own record is
# $VCL_RESULTS_DIR/suite.json (each stage's time, budget and result, the machine, what was cached); the docs' figures
# come from committed copies, which `npm run docs -- --accept $VCL_RESULTS_DIR` replaces with this run's.
set -uo pipefail

# Each stage's budget in seconds, on a 2-core machine with warm caches (the toolchain's: a cold build). The summary
# prints it beside the stage's time and marks a stage over it OVER BUDGET, without failing the run.
declare -A BUDGET=(
  [install]=300 [static]=300 [unit]=420 [engine]=1200 [toolchain]=1500 [self-test]=420
  [integration-ray]=900 [faults]=1100
  [integration-others]=900 [e2e]=240 [policy]=180 [gitops]=180
  [security]=30 [timings]=30 [teardown]=120 [clean-tree]=30
)

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

# Each jest run also writes its results where the Security table's generator reads them (tests/security/report.js).
# A run of its own, unless the caller names one (then emptied first): two runs at once (a full one and a --fast one)
# never delete each other's results. `latest` points at the newest run.
if [[ -z ${VCL_RESULTS_DIR:-} ]]; then
  base="${TMPDIR:-/tmp}/vllm-cluster-results"
  mkdir -p "$base" && chmod 700 "$base"
  VCL_RESULTS_DIR=$(mktemp -d "$base/run-$(date +%Y%m%d-%H%M%S)-XXXX")
  ln -sfn "$VCL_RESULTS_DIR" "$base/latest"
else
  rm -rf "$VCL_RESULTS_DIR" && mkdir -p "$VCL_RESULTS_DIR"
fi
export VCL_RESULTS_DIR
echo "npm test: results in $VCL_RESULTS_DIR"
stages_tsv="$VCL_RESULTS_DIR/stages.tsv"
: >"$stages_tsv"
touch "$VCL_RESULTS_DIR/.started" # what the run built into the caches is newer than this

stage() { # id name command...
  local id="$1" name="$2"; shift 2
  local start=$SECONDS budget=${BUDGET[$id]:-0} over=""
  echo
  echo "=== stage: $name ($(date +%H:%M:%S); budget ${budget}s)"
  "$@"
  local rc=$?
  local took=$((SECONDS - start))
  ((took <= budget)) || over="  OVER BUDGET"
  if ((rc == 0)); then
    passed=$((passed + 1)); summary+=("PASS    $name (${took}s of ${budget}s)$over")
  else
    failed=$((failed + 1)); summary+=("FAIL    $name (${took}s of ${budget}s, exit $rc)$over")
  fi
  printf '%s\t%s\t%s\t%s\t%s\n' "$id" "$name" "$took" "$budget" "$( ((rc == 0)) && echo pass || echo fail)" >>"$stages_tsv"
  return "$rc"
}

# What `git status` lists (ignored files do not count), each listed file with a hash of its content, so a file
# that was already modified and is changed again shows too.
tree_state() {
  git status --porcelain --untracked-files=all | while IFS= read -r line; do
    local f=${line:3}
    f=${f##* -> }
    printf '%s %s\n' "$line" "$(if [[ -f $f ]]; then sha256sum <"$f" | cut -c1-16; else echo -; fi)"
  done
}
if git rev-parse --is-inside-work-tree >/dev/null 2>&1; then tree_state >"$VCL_RESULTS_DIR/tree-before.txt"; fi

# The last stage: npm test leaves the tree as it found it (in a fresh clone: `git status --porcelain` is empty).
tree_unchanged() {
  if [[ ! -f $VCL_RESULTS_DIR/tree-before.txt ]]; then
    echo "not a git checkout: nothing to compare"
    return 0
  fi
  local changes
  changes=$(diff "$VCL_RESULTS_DIR/tree-before.txt" <(tree_state) | sed -n 's/^[<>] //p')
  if [[ -n $changes ]]; then
    echo "the run changed the tree (results belong under \$VCL_RESULTS_DIR); git status, with content hashes:" >&2
    printf '  %s\n' "$changes" >&2
    return 1
  fi
  echo "the tree is as the run found it ($(wc -l <"$VCL_RESULTS_DIR/tree-before.txt") entries in git status before and after)"
}

install_npm() {
  # A fresh clone (CI) installs exactly the lock file; a warm tree reuses node_modules.
  if [[ ! -d node_modules || package-lock.json -nt node_modules/.package-lock.json ]]; then
    npm ci --no-audit --no-fund
  fi
}

# Debian's shellcheck package when the command is missing and this is root (dpkg's lock waited for, not fought over)
ensure_shellcheck() {
  if ! command -v shellcheck >/dev/null && [[ $(id -u) == 0 ]]; then
    local apt=(apt-get -o DPkg::Lock::Timeout=300)
    ("${apt[@]}" install -y -qq shellcheck >/dev/null 2>&1 || { "${apt[@]}" update -qq >/dev/null 2>&1 && "${apt[@]}" install -y -qq shellcheck >/dev/null 2>&1; }) || true
  fi
}

static_checks() {
  npm run --silent build && npm run --silent lint && bash tests/gitops/lint-workflows.sh || return 1
  ensure_shellcheck
  command -v shellcheck >/dev/null || { echo "shellcheck: not installed and could not be installed"; return 1; }
  # every shell script, the host scripts of infra/scripts (.sh and .bash) included
  mapfile -t scripts < <(git ls-files '*.sh' '*.bash' setup tests bench | grep -E '\.(sh|bash)$|/testbed$' | sort -u)
  shellcheck -S warning "${scripts[@]}" && echo "shellcheck: ${#scripts[@]} scripts clean"
}

# A stage that runs SCRIPT [ARGS...], named by the script's "# stage:" line plus SUFFIX. A script that was renamed or
# removed fails here under its path: it never drops out of the run and the count.
script_stage() { # id script suffix args...
  local id=$1 t=$2 suffix=${3:-} name
  shift 3 || shift $#
  name=$(sed -n 's/^# stage: //p' "$t" 2>/dev/null | head -n 1 | grep .) || name="$t (missing or without a '# stage:' line)"
  stage "$id" "$name$suffix" bash "$t" "$@"
}

unit_tests() {
  # --fast: two workers on the two cores, nothing else runs; the full run: one, beside the host stages (the lane below)
  npx jest --ci --selectProjects unit policy -w "${VCL_UNIT_WORKERS:-2}" --json --outputFile="$VCL_RESULTS_DIR/unit.json"
}

# The lane: the stages that need no simulated host (static checks, unit and policy tests, Docker 28's build) run in
# the background beside the toolchain, the terminal stage and the backend-ray stage. Each writes its output to a log
# of its own and its line to the lane's stages file; lane_join waits for the lane, prints each stage's output whole,
# and counts its stages like the others (the summary says "beside"). Not with --fast (nothing to run beside). The host
# stages are CPU-bound on 2 cores too, so this gains only what they leave idle: two integration parts at once on
# hosts of their own (tests/integration/run.sh side on hosts 3 and 4 beside `ray`) each took about twice as long and
# were measured no faster than one after the other (docs/testing.md).
lane_dir="" lane_pid=""
lane_start() { # label function
  lane_dir="$VCL_RESULTS_DIR/lane"
  mkdir -p "$lane_dir"
  (
    stages_tsv="$lane_dir/stages.tsv"
    : >"$stages_tsv"
    "$2"
  ) </dev/null &
  lane_pid=$!
  echo
  echo "=== beside the stages below, in the background: $1 (their output follows when they end)"
}
lane_stage() { # id name command...: one stage inside the lane, its output to the lane's log for it
  stage "$@" >"$lane_dir/$1.log" 2>&1
}
lane_join() {
  [[ -n $lane_pid ]] || return 0
  local start=$SECONDS id name took budget result over
  wait "$lane_pid"
  lane_pid=""
  echo
  echo "=== the background stages ended (waited $((SECONDS - start))s for them here); their output:"
  while IFS=$'\t' read -r id name took budget result; do
    [[ ! -f $lane_dir/$id.log ]] || cat "$lane_dir/$id.log"
    over=""
    ((took <= budget)) || over="  OVER BUDGET"
    if [[ $result == pass ]]; then
      passed=$((passed + 1)); summary+=("PASS    $name (${took}s of ${budget}s, beside)$over")
    else
      failed=$((failed + 1)); summary+=("FAIL    $name (${took}s of ${budget}s, beside)$over")
    fi
    printf '%s\t%s\t%s\t%s\t%s\n' "$id" "$name" "$took" "$budget" "$result" >>"$stages_tsv"
  done <"$lane_dir/stages.tsv"
}

# Docker 28 (the image chain's faults on the containerd store need it in the integration stage): a warm cache is
# found at once; a cold one builds about 12 minutes at nice 10 here instead of inside that stage. Its last step links
# Debian's runc, which the terminal stage's package install brings: waited for, bounded.
engine_ready() {
  local waited=0
  until command -v runc >/dev/null; do
    ((waited < 1800)) || { echo "engine: runc still not installed after ${waited}s (the testbed installs it with docker.io)"; return 1; }
    sleep 5; waited=$((waited + 5))
  done
  bash setup/engine.sh
}

hostless_lane() {
  lane_stage static "static checks (tsc --strict, eslint, prettier, actionlint, shellcheck)" static_checks
  # one jest worker: the other core is the host stages'
  VCL_UNIT_WORKERS=1 lane_stage unit "unit and policy tests (jest, Pulumi mocks)" unit_tests
  lane_stage engine "Docker 28 for the simulated hosts (setup/engine.sh: built once into the cache, niced)" engine_ready
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
# suite.json: this run's record (tests/lib/suite.js), written however the run ends
toolchain_cache="not used" image_cache="not used"
write_suite() {
  VCL_SUITE_FULL=$((1 - fast)) VCL_SUITE_SECONDS=$((SECONDS - t_all)) VCL_SUITE_TOOLCHAIN=$toolchain_cache \
    VCL_SUITE_IMAGE=$image_cache node tests/lib/suite.js record "$stages_tsv" "$VCL_RESULTS_DIR/suite.json" ||
    echo "npm test: could not write $VCL_RESULTS_DIR/suite.json" >&2
}
if ((fast == 0)); then
  if [[ $(id -u) != 0 ]]; then
    echo "npm test: the full suite needs root (network namespaces, one Docker engine per simulated host);" >&2
    echo "run it as root, or npm test -- --fast for static checks and unit tests" >&2
    exit 1
  fi
  demo_guard || exit 1
fi
stage install "install npm packages" install_npm || { write_suite; exit 1; }
if ((fast == 1)); then
  stage static "static checks (tsc --strict, eslint, prettier, actionlint, shellcheck)" static_checks
  stage unit "unit and policy tests (jest, Pulumi mocks)" unit_tests
else
  ensure_shellcheck # before the terminal stage's apt-get runs: never two package installs at once
  lane_start "static checks, unit and policy tests, Docker 28's build" hostless_lane
  mkdir -p "${VCL_TESTBED_DIR:-/var/lib/vllm-cluster-testbed}"
  echo "$$" >"${VCL_TESTBED_DIR:-/var/lib/vllm-cluster-testbed}/tests-running"
  trap 'rm -f "${VCL_TESTBED_DIR:-/var/lib/vllm-cluster-testbed}/tests-running"' EXIT
  if bash setup/toolchain.sh --check >/dev/null 2>&1; then toolchain_cache=cached; else toolchain_cache=cold; fi
  stage toolchain "Pulumi toolchain from pinned sources (real CLI lifecycle with all three providers)" toolchain
  # The self-test runs inside the terminal stage: the first run's steps as a person meets them, in a terminal. It
  # brings the hosts up from nothing and leaves them up for the stages after it (VCL_SELFTEST_KEEP=hosts): a second
  # start from nothing would load the image onto spark-1 again (about 90 s here). The teardown stage's `testbed down`
  # then fails on anything left behind.
  export VCL_SELFTEST_KEEP=hosts
  script_stage self-test tests/testbed/terminal.sh
  unset VCL_SELFTEST_KEEP
  # a test image built by this run is a tarball in the testbed's cache newer than the run's start
  image_cache=cached
  if [[ -n $(find "${XDG_CACHE_HOME:-$HOME/.cache}/vllm-cluster/testbed-image" -maxdepth 1 -name '*.tar' \
    -newer "$VCL_RESULTS_DIR/.started" 2>/dev/null) ]]; then image_cache=cold; fi
  # The backend-ray integration file hands its serving `local` cluster to the fault suite, which adopts it instead
  # of a cold up of its own and destroys it at its end (tests/integration/handoff.ts).
  export VCL_HANDOFF="$VCL_RESULTS_DIR/local-stack.handoff"
  script_stage integration-ray tests/integration/run.sh ": backend ray (its serving cluster goes on to the fault suite)" ray
  script_stage faults tests/faults/run.sh
  # the lane ends here: this stage runs Docker 28 on some hosts, and the e2e stage's detector counts every ssh
  # connection to a host while it runs
  lane_join
  script_stage integration-others tests/integration/run.sh ": backend native, the Hub download, discovery, the chain agent" others
  script_stage e2e tests/e2e/run.sh
  script_stage policy tests/e2e/policy.sh
  script_stage gitops tests/gitops/preview-local.sh
  # Run apart, by their own commands, so that the whole suite keeps within CI's 90 minutes on this kind of machine on
  # its slower days (docs/testing.md, "What runs apart"): npm run test:upgrade (the upgrade from the release before
  # VllmCluster), npm run bench -- --smoke, npm run bench:distribution -- --smoke, npm run test:engines,
  # npm run test:build-scale (image.build, then a third host added and removed).
  stage security "Security table from this run's test results (security/results.json in the results directory)" \
    node tests/security/report.js "$VCL_RESULTS_DIR"
  stage timings "where the time went, per test file (tests/lib/timings-report.js)" \
    node tests/lib/timings-report.js "$VCL_RESULTS_DIR" "$VCL_RESULTS_DIR/faults/jest.json"
  stage teardown "tear down the simulated hosts and the machine engine (and check nothing is left)" \
    tests/testbed/testbed down --machine-engine
fi
stage clean-tree "the tree is as the run found it (git status --porcelain; ignored files do not count)" tree_unchanged
write_suite

echo
echo "=== summary ($((SECONDS - t_all))s)"
printf '  %s\n' "${summary[@]}"
echo "$passed passed, $failed failed"
if ((fast == 0)); then
  echo "results: $VCL_RESULTS_DIR (suite.json); to publish this run's figures in the docs: npm run docs -- --accept $VCL_RESULTS_DIR"
fi
((failed == 0))

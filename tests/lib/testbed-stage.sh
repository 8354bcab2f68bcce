# shellcheck shell=bash
# Sourced by the stages that run on the simulated hosts (integration, faults, bench): checks root, installs npm
# packages when missing, puts the Pulumi toolchain on PATH, refuses while the demo holds the hosts, and brings the
# testbed up with at least $2 hosts (never fewer than are running: an `up 2` would stop hosts 3+ that a caller
# may be using). On any failure it prints "<stage>: FAILED: <why>" and returns 1.
testbed_stage() {
  local stage=$1 want=${2:-2} existing hosts
  if [[ $(id -u) != 0 ]]; then
    echo "$stage: FAILED: the simulated hosts need root (network namespaces, dockerd per host)" >&2
    return 1
  fi
  [[ -d node_modules ]] || npm ci --no-audit --no-fund || return 1
  # shellcheck source=../../setup/env.sh
  source setup/env.sh || { echo "$stage: FAILED: setup/toolchain.sh could not provide the toolchain" >&2; return 1; }
  if [[ -e ${VCL_TESTBED_DIR:-/var/lib/vllm-cluster-testbed}/demo ]]; then
    echo "$stage: FAILED: the demo holds the simulated hosts; stop it first: npm run demo -- down" >&2
    return 1
  fi
  existing=$(ip netns list 2>/dev/null | awk '{print $1}' | sed -n 's/^vcl-h\([0-9][0-9]*\)$/\1/p' | sort -n | tail -n 1)
  hosts=$((${existing:-0} > want ? existing : want))
  echo "$stage: testbed up $hosts"
  timeout --foreground 3600 tests/testbed/testbed up "$hosts" || { echo "$stage: FAILED: testbed up $hosts" >&2; return 1; }
}

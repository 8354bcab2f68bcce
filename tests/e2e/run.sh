#!/usr/bin/env bash
# stage: real Pulumi CLI on the real program: invalid stack configs fail naming the key, before any host is touched
#
# The real `pulumi` CLI (setup/env.sh) previews and ups the real program with invalid stack configs, using a
# throwaway file backend and a temporary copy of the program (the repository tree stays untouched). Each run must
# fail naming the offending key and rule, list every problem at once, print no stack trace, and open no ssh
# connection to a simulated host: an ssh spy first on PATH, strace of connect() calls, and the hosts' sshd logs
# all have to agree. (The cluster itself is deployed by tests/integration/run.sh.)
# Ends with "N passed, M failed".
set -uo pipefail

REPO_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
TESTBED_DIR="${VCL_TESTBED_DIR:-/var/lib/vllm-cluster-testbed}"
# shellcheck source=../lib/results.sh
source "$REPO_ROOT/tests/lib/results.sh"
show_tail() { echo "---- $1 (last ${2:-20} lines)"; tail -n "${2:-20}" "$1"; echo "----"; }

cd "$REPO_ROOT" || exit 1
WORK="$(mktemp -d "${TMPDIR:-/tmp}/vcl-e2e.XXXXXX")"
trap 'rm -rf "$WORK"' EXIT

if ! timeout --foreground 3600 tests/testbed/testbed up 2 >"$WORK/testbed-up.log" 2>&1; then
  show_tail "$WORK/testbed-up.log"
  fail "testbed: tests/testbed/testbed up 2"
  finish
fi
# shellcheck source=../../setup/env.sh
if ! source setup/env.sh 2>"$WORK/toolchain.log"; then
  cat "$WORK/toolchain.log"
  fail "toolchain: setup/env.sh"
  finish
fi
export PULUMI_BACKEND_URL="file://$WORK/state"
export PULUMI_CONFIG_PASSPHRASE="vllm-cluster-local-simulated-only" # the local stack file carries its salt
mkdir -p "$WORK/state" "$WORK/bin"

# ---------------------------------------------------------------------------------------- detectors
mgmt_ip() { echo "10.231.0.$((10 + $1))"; }
SSH_OPTS=(-i "$TESTBED_DIR/ssh/id_ed25519" -o IdentitiesOnly=yes -o "UserKnownHostsFile=$TESTBED_DIR/ssh/known_hosts"
  -o StrictHostKeyChecking=yes -o BatchMode=yes -o ConnectTimeout=10)
REAL_SSH="$(command -v ssh)"
SSH_CALLS="$WORK/ssh-calls.log"
: >"$SSH_CALLS"
cat >"$WORK/bin/ssh" <<EOF
#!/usr/bin/env bash
printf '%s\n' "\$*" >>'$SSH_CALLS'
exec '$REAL_SSH' "\$@"
EOF
chmod +x "$WORK/bin/ssh"
export PATH="$WORK/bin:$PATH"
# The connection detector needs strace (it sees in-process ssh clients too): installed here, and without it the
# stage fails rather than pass checks it cannot make.
if ! command -v strace >/dev/null; then
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq strace >/dev/null 2>&1 ||
    { apt-get update -qq >/dev/null 2>&1 && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq strace >/dev/null 2>&1; } || true
fi
if ! command -v strace >/dev/null; then
  fail "strace is not installed and could not be installed: the connection detector cannot run"
  finish
fi
TRACER=(strace -f --seccomp-bpf -qq -e trace=connect -o "$WORK/connect.trace")

sshd_accepted() { cat "$TESTBED_DIR"/hosts/spark-{1,2}/sshd.log 2>/dev/null | grep -c 'Accepted publickey'; }
host_connects() { # connect() calls of the last traced command to a simulated host's sshd
  grep -E 'sin_port=htons\(22\), sin_addr=inet_addr\("10\.231\.0\.1[12]"\)' "$WORK/connect.trace" || true
}
# run_without_ssh LOG command...: runs the command (exit code in RC); NO_SSH=1 when no ssh started (spy), no
# connect() reached a host's port 22 (strace -f, which also sees in-process ssh clients) and no host's sshd
# accepted a connection meanwhile.
run_without_ssh() {
  local log="$1" calls0 acc0
  shift
  calls0="$(wc -l <"$SSH_CALLS")" acc0="$(sshd_accepted)"
  "${TRACER[@]}" "$@" >"$log" 2>&1
  RC=$?
  NO_SSH=0
  [[ "$(wc -l <"$SSH_CALLS")" == "$calls0" && -z "$(host_connects)" && "$(sshd_accepted)" == "$acc0" ]] && NO_SSH=1
}
run_without_ssh "$WORK/detector.log" ssh "${SSH_OPTS[@]}" "root@$(mgmt_ip 2)" true
check "detector: one ssh to spark-2 is seen by the spy, strace and spark-2's sshd log" \
  test "$RC/$NO_SSH/$(wc -l <"$SSH_CALLS")" = "0/0/1" -a -n "$(host_connects)"

# ------------------------------------------------------------------------------------- config errors
P="$WORK/project"
mkdir -p "$P"
cp -r Pulumi.yaml package.json tsconfig.json infra components stacks "$P/"
ln -s "$REPO_ROOT/node_modules" "$P/node_modules"
(cd "$P" && pulumi stack init e2e-config --non-interactive >"$WORK/init.log" 2>&1) || { show_tail "$WORK/init.log"; fail "stack init"; finish; }

# config_case NAME VERB 'old=>new'... -- EXPECTED...: edits of the local stack file; each EXPECTED must be printed.
config_case() {
  local name="$1" verb="$2" cfg="$WORK/Pulumi.$1.yaml" log="$WORK/$1.log"
  shift 2
  local edits=() expected=()
  while (($# > 0)) && [[ "$1" != -- ]]; do edits+=("$1"); shift; done
  shift
  expected=("$@")
  python3 - stacks/Pulumi.local.yaml "$cfg" "${edits[@]}" <<'EOF' || { fail "config $name: edit the stack file"; return; }
import sys
src, dst, *edits = sys.argv[1:]
text = open(src).read()
for e in edits:
    old, new = e.split("=>")
    assert old in text, f"{old!r} not in {src}"
    text = text.replace(old, new, 1)
open(dst, "w").write(text)
EOF
  local extra=()
  [[ "$verb" == up ]] && extra=(--yes --skip-preview)
  run_without_ssh "$log" timeout --foreground 300 pulumi "$verb" "${extra[@]}" --non-interactive --cwd "$P" --stack e2e-config --config-file "$cfg"
  check "config $name: $verb fails (exit $RC)" test "$RC" -ne 0
  local e
  for e in "${expected[@]}"; do
    if grep -qF "$e" "$log"; then pass "config $name: output names '$e'"; else show_tail "$log"; fail "config $name: output names '$e'"; fi
  done
  if grep -qE '^\s+at |node_modules/|\.(ts|js):[0-9]+:[0-9]+' "$log"; then
    show_tail "$log" 40; fail "config $name: no stack trace in the output"
  else
    pass "config $name: no stack trace in the output"
  fi
  check "config $name: no ssh connection reached any host" test "$NO_SSH" = 1
}
config_case tp-times-pp preview "tensorParallelSize: 2=>tensorParallelSize: 4" -- \
  "serve.tensorParallelSize: tensorParallelSize x pipelineParallelSize = 4 x 1 = 4 but the nodes offer 2 GPUs"
config_case duplicate-fabric-ip up "fabricIp: 10.232.0.12=>fabricIp: 10.232.0.11" -- \
  "nodes[1].fabricIp: 10.232.0.11 is used by nodes[0]"
config_case two-problems-at-once preview "port: 8000=>port: 99999" "gpuMemoryUtilization: 0.5=>gpuMemoryUtilization: 1.5" -- \
  "serve.port" "serve.gpuMemoryUtilization"
timeout --foreground 120 pulumi stack rm --yes --force --cwd "$P" --stack e2e-config >/dev/null 2>&1
finish

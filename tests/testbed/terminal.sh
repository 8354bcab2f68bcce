#!/usr/bin/env bash
# stage: a person's terminal: the first run's steps under a pseudo-terminal (Debian packages, Ctrl-C in an install, the self-test)
#
# `npm run demo` is typed in a terminal; CI has none. This runs what a first run does in a terminal of its own
# (tests/lib/terminal.sh) and fails, naming the process, if the terminal stops any of it:
#   1. the Debian package install (apt-get and dpkg, under `timeout`), forced with `testbed packages --reinstall`
#      on a machine that already has every package;
#   2. Ctrl-C during that install (SIGINT to the terminal's foreground process group, as the terminal sends it):
#      the run stops, and the next one finishes the install and succeeds (nothing is left half-installed);
#   3. the testbed's self-test, which brings the hosts up from nothing (engines, sshd, the image) and serves.
# Needs root.
set -uo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
cd "$root" || exit 1
# shellcheck source=../lib/terminal.sh
source tests/lib/terminal.sh

TB=tests/testbed/testbed
# A small package every Debian system has: reinstalling it runs apt-get and dpkg the whole way, harmlessly.
PKG=hostname
failed=0
step() { printf '[terminal %s] %s\n' "$(date +%H:%M:%S)" "$*"; }
bad() { step "FAIL: $*"; failed=1; }

step "1. Debian package install in a terminal: testbed packages --reinstall $PKG"
in_terminal 900 "$TB" packages --reinstall "$PKG" || bad "the package install in a terminal (exit $?)"

step "2. Ctrl-C during the install, then the next run"
script -qec "$(printf '%q ' "$TB" packages --reinstall "$PKG"); exit \$?" /dev/null </dev/null >/dev/null 2>&1 &
pid=$!
sid="" interrupted=""
for _ in $(seq 1 240); do
  [[ -n $sid ]] || sid=$(ps -o sid= --ppid "$pid" 2>/dev/null | awk 'NR == 1 { print $1 }')
  # once apt-get or dpkg runs in the terminal's session, do what Ctrl-C does: SIGINT to the foreground group
  if [[ -n $sid ]] && ps -e -o sid=,comm= | awk -v s="$sid" '$1 == s && $2 ~ /^(apt-get|dpkg|http)/ { f = 1 } END { exit !f }'; then
    fg=$(ps -o tpgid= -p "$sid" | tr -d ' ')
    step "   sending SIGINT to the terminal's foreground process group $fg"
    kill -INT -- "-$fg" 2>/dev/null && interrupted=yes
    break
  fi
  kill -0 "$pid" 2>/dev/null || break
  sleep 0.25
done
[[ -n $interrupted ]] || bad "the install was never seen running apt-get or dpkg, so it could not be interrupted"
for _ in $(seq 1 120); do kill -0 "$pid" 2>/dev/null || break; sleep 0.5; done
if kill -0 "$pid" 2>/dev/null; then
  bad "the interrupted install had not stopped 60 s after Ctrl-C"
  [[ -n $sid ]] && pkill -KILL -s "$sid"
fi
wait "$pid" 2>/dev/null
rc=$?
# Ctrl-C ends the run with a failure (130: interrupted), never as if the install had been done
[[ -z $interrupted || $rc != 0 ]] || bad "the install went on to succeed after Ctrl-C (exit 0)"
step "   the interrupted run ended with exit $rc"
in_terminal 900 "$TB" packages || bad "the run after Ctrl-C (exit $?)"
audit=$(dpkg --audit 2>&1)
[[ -z $audit ]] || bad "dpkg reports half-installed packages after the next run: $audit"
[[ $failed == 0 ]] && step "   the next run finished the install; dpkg --audit reports nothing"

step "3. the self-test in a terminal (hosts from nothing, the image, vLLM)"
in_terminal 1800 bash tests/testbed/selftest.sh || bad "the self-test in a terminal (exit $?)"

if ((failed)); then
  step "FAILED"
  exit 1
fi
step "passed: nothing was stopped by the terminal"

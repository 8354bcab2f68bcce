# shellcheck shell=bash
# A command run as a person runs it: in a terminal of its own (a pseudo-terminal from util-linux `script`), whatever
# the caller has (CI has none). A process that the terminal stops (state T: SIGTTOU from a tcsetattr made outside the
# terminal's foreground process group, SIGTTIN from a read) fails the run at once, naming it, instead of hanging until
# some outer time limit: that is how `timeout` without --foreground broke the first `npm run demo` typed in a terminal.
#
#   in_terminal SECONDS CMD...    CMD's exit status; 125 when a process was stopped, 124 after SECONDS

# The processes of session SID that are stopped, one "pid state command" line each.
_stopped_in_session() {
  ps -e -o pid=,sid=,stat=,args= 2>/dev/null | awk -v sid="$1" '$2 == sid && $3 ~ /^T/ { $2 = ""; print }'
}

in_terminal() {
  local limit=$1 cmd pid sid="" deadline stopped="" rc
  shift
  printf -v cmd '%q ' "$@"
  # The shell that script starts stays, waiting for CMD, rather than exec'ing it ("; exit"): a session whose leader
  # exec'd a program that stopped ends at once with status 0 when stdin is at its end (seen with util-linux 2.38).
  cmd+='; exit $?'
  # -e: CMD's exit status; -q: no start and end lines; /dev/null: no typescript file. stdin from /dev/null: script
  # then sends the terminal an end-of-file and waits for CMD, which reads nothing from it.
  script -qec "$cmd" /dev/null </dev/null &
  pid=$!
  deadline=$((SECONDS + limit))
  while kill -0 "$pid" 2>/dev/null; do
    # script's child leads the session of the new terminal
    [[ -n $sid ]] || sid=$(ps -o sid= --ppid "$pid" 2>/dev/null | awk 'NR == 1 { print $1 }')
    if [[ -n $sid ]] && stopped=$(_stopped_in_session "$sid") && [[ -n $stopped ]]; then
      sleep 1 # a stop that lasts: not a process caught between two signals
      stopped=$(_stopped_in_session "$sid")
      if [[ -n $stopped ]]; then
        echo "in_terminal: stopped by the terminal (a process outside its foreground group touched it):" >&2
        printf '  %s\n' "$stopped" >&2
        pkill -KILL -s "$sid" 2>/dev/null
        wait "$pid" 2>/dev/null
        return 125
      fi
    fi
    if ((SECONDS >= deadline)); then
      echo "in_terminal: $* did not finish within ${limit}s" >&2
      [[ -n $sid ]] && pkill -KILL -s "$sid" 2>/dev/null
      wait "$pid" 2>/dev/null
      return 124
    fi
    sleep 0.5
  done
  wait "$pid"
  rc=$?
  return "$rc"
}

# shellcheck shell=bash
# The result convention every shell test stage shares (source it): one line per assertion, "ok   - <what>" or
# "FAIL - <what>" (with the evidence indented below it), and a last line "N passed, M failed". `finish` exits
# non-zero when anything failed; setup/test.sh counts a stage as passed only on exit 0.
PASSED=0
FAILED=0
FAILURES=()

pass() { PASSED=$((PASSED + 1)); echo "ok   - $1"; }

fail() { # what [evidence]
  FAILED=$((FAILED + 1))
  FAILURES+=("$1")
  echo "FAIL - $1"
  [[ -z "${2:-}" ]] || printf '%s\n' "$2" | tail -n 15 | sed 's/^/       | /'
}

# check WHAT COMMAND...: one assertion; on failure its output is shown as evidence.
check() {
  local what="$1" out
  shift
  if out="$("$@" 2>&1)"; then pass "$what"; else fail "$what" "$out"; fi
}

# finish: the summary line, the failures again, and the exit status.
finish() {
  if ((${#FAILURES[@]} > 0)); then
    echo "failed:"
    printf '  - %s\n' "${FAILURES[@]}"
  fi
  echo "$PASSED passed, $FAILED failed"
  ((FAILED == 0))
  exit $?
}

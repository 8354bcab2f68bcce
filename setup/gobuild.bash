# shellcheck shell=bash
# Go builds that setup/toolchain.sh and setup/engine.sh share: the go command as this project runs it, and a step
# runner that reports progress while a long build runs. The sourcing script defines log() (its own prefix) and sets
# NICE_LEVEL and BUILD_JOBS.

fmt_secs() { printf '%dm%02ds' $(($1 / 60)) $(($1 % 60)); }

# run_step WHAT ESTIMATE LOG COMMAND...: runs COMMAND (output to LOG) and reports every 20 s what it is doing,
# how long it has taken against the estimate (cold, 2 cores) and the packages compiled so far, so a build of
# several minutes never looks hung. On failure prints the log's tail and returns 1.
run_step() {
  local what="$1" est="$2" logf="$3" t0=$SECONDS next pid rc
  shift 3
  log "$what: started (usually about $(fmt_secs "$est") cold on 2 cores, seconds when cached; log: $logf)"
  "$@" >>"$logf" 2>&1 </dev/null &
  pid=$!
  next=$((SECONDS + 20))
  while kill -0 "$pid" 2>/dev/null; do
    sleep 1
    if ((SECONDS >= next)); then
      log "  ... $what: $(fmt_secs $((SECONDS - t0))) of about $(fmt_secs "$est"); $(grep -c '^go: downloading' "$logf" || true) modules downloaded, $(grep -vc '^go: ' "$logf" || true) packages compiled; last: $(tail -n 1 "$logf" | cut -c1-80)"
      next=$((SECONDS + 20))
    fi
  done
  if wait "$pid"; then rc=0; else rc=$?; fi
  if ((rc != 0)); then
    log "$what: FAILED after $(fmt_secs $((SECONDS - t0))) (exit $rc); last lines of $logf:"
    tail -n 20 "$logf" >&2
    return 1
  fi
  log "$what: done in $(fmt_secs $((SECONDS - t0)))"
}

# The go command here: the local Go toolchain only, no cgo, no VCS stamping, reproducible paths, the same
# flags for `go generate` (its `go run`) and `go build` so they share the build cache; gentle on 2 cores.
gocmd() {
  nice -n "$NICE_LEVEL" env GOTOOLCHAIN=local CGO_ENABLED=0 GOFLAGS="${GOFLAGS:-} -trimpath -buildvcs=false" go "$@"
}
gobuild() { # output ldflags package [tags]
  gocmd build -v -p "$BUILD_JOBS" ${4:+-tags "$4"} -ldflags "-s -w $2" -o "$1.partial" "$3" && mv "$1.partial" "$1"
}

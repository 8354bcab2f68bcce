#!/usr/bin/env bash
# Provide Docker Engine 28 for the simulated hosts (tests/testbed/testbed up --engine ...): dockerd, containerd, its
# runc shim and ctr, built with `go` from the Go module proxy at the versions and module sums pinned in
# setup/engine.lock, plus the runc that the lock names. Nothing here goes on PATH or replaces the machine's own
# docker CLI, dockerd or containerd: the testbed starts these binaries by their path.
#
# The binaries are cached outside the repository under
# ${VCL_ENGINE_CACHE:-${XDG_CACHE_HOME:-~/.cache}/vllm-cluster/engine}/docker-v<version>-containerd-v<version>-<key>/bin,
# keyed by the lock's rows and this script's build recipe, so a changed pin never reuses an old binary. A warm run
# only checks files; a fresh machine builds (about 12 minutes on 2 cores plus the module downloads).
#
# Usage:
#   bash setup/engine.sh           ensure the binaries; progress on stderr; prints their directory on stdout
#   bash setup/engine.sh --check   build nothing; prints the directory and exits 0 when complete, else exits 2
# Exit: 0 complete; 1 a build, a module sum or the runc check failed (the message names it); 2 (--check) incomplete.
#
# Environment: VCL_ENGINE_CACHE (cache root), VCL_ENGINE_BUILD_JOBS (go build -p, default: number of CPUs),
# VCL_ENGINE_NICE (default 10).
set -euo pipefail

REPO_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
LOCK="$REPO_ROOT/setup/engine.lock"
CACHE_ROOT="${VCL_ENGINE_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/vllm-cluster/engine}"
# shellcheck disable=SC2034 # read by gobuild.bash
BUILD_JOBS="${VCL_ENGINE_BUILD_JOBS:-$(nproc 2>/dev/null || echo 2)}"
# shellcheck disable=SC2034 # read by gobuild.bash
NICE_LEVEL="${VCL_ENGINE_NICE:-10}"

MODE=ensure
case "${1:-}" in
  "") ;;
  --check) MODE=check ;;
  -h | --help) awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "${BASH_SOURCE[0]}"; exit 0 ;;
  *) echo "engine.sh: unknown argument: $1 (see --help)" >&2; exit 64 ;;
esac

log() { echo "engine: $*" >&2; }
die() { echo "engine: ERROR: $*" >&2; exit 1; }

# shellcheck source=gobuild.bash
source "$REPO_ROOT/setup/gobuild.bash"

# lock_field KIND NAME COLUMN: one field of a lock row (columns: 3 version, 4 module or origin, 5 sum).
lock_field() {
  awk -F'\t' -v k="$1" -v n="$2" -v c="$3" '!/^#/ && $1 == k && $2 == n { print $c; found = 1 } END { exit !found }' "$LOCK" ||
    die "setup/engine.lock has no row '$1 $2'"
}
DOCKER_VERSION="$(lock_field module docker 3)"
CONTAINERD_VERSION="$(lock_field module containerd 3)"
RUNC_MIN="$(lock_field runtime runc 3)"
[[ "$(lock_field runtime runc 4)" == debian ]] || die "setup/engine.lock: runtime runc must come from 'debian'"

# Build tags leave out what cannot build without cgo or is never used on the simulated hosts, as moby's hack/make
# and containerd's Makefile do for their static builds: btrfs and zfs storage (cgo, or tools the hosts lack),
# fuse-overlayfs, devmapper, and containerd's Kubernetes CRI plugin (dockerd does not use it).
DOCKERD_TAGS="netgo osusergo static_build exclude_graphdriver_btrfs exclude_graphdriver_zfs exclude_graphdriver_fuseoverlayfs"
CONTAINERD_TAGS="urfave_cli_no_docs netgo osusergo static_build no_btrfs no_devmapper no_zfs no_cri"
SHIM_TAGS="urfave_cli_no_docs netgo osusergo static_build no_grpc"
CTR_TAGS="urfave_cli_no_docs netgo osusergo static_build"
RECIPE="1 $DOCKERD_TAGS | $CONTAINERD_TAGS | $SHIM_TAGS | $CTR_TAGS"
KEY="$(printf '%s\n%s\n' "$(grep -v '^#' "$LOCK")" "$RECIPE" | sha256sum | cut -c1-12)"
DIR="$CACHE_ROOT/docker-v$DOCKER_VERSION-containerd-v$CONTAINERD_VERSION-$KEY"
BIN="$DIR/bin"
BINARIES=(dockerd containerd containerd-shim-runc-v2 ctr runc)

complete() {
  local b
  for b in "${BINARIES[@]}"; do [[ -x "$BIN/$b" ]] || return 1; done
}

# module_dir NAME: the module of the lock row NAME from the Go module proxy (or the module cache), its sum checked
# against the lock; prints its directory in the module cache (read-only).
module_dir() {
  local mod want json sum dir
  mod="$(lock_field module "$1" 4)"
  want="$(lock_field module "$1" 5)"
  json="$(cd "$DIR" && gocmd mod download -json "$mod")" || die "go mod download $mod failed: $json"
  sum="$(sed -n 's/^[[:space:]]*"Sum": "\(.*\)",\{0,1\}$/\1/p' <<<"$json")"
  dir="$(sed -n 's/^[[:space:]]*"Dir": "\(.*\)",\{0,1\}$/\1/p' <<<"$json")"
  [[ "$sum" == "$want" ]] || die "module $mod: sum '$sum' does not match setup/engine.lock ($want); refusing it"
  [[ -d "$dir" ]] || die "module $mod: go mod download printed no directory"
  printf '%s\n' "$dir"
}

# writable_copy NAME DEST: a writable copy of the module to build in (the module cache is read-only).
writable_copy() {
  local src
  src="$(module_dir "$1")" || exit 1
  rm -rf "$2" && mkdir -p "$(dirname "$2")"
  cp -r "$src" "$2" && chmod -R u+w "$2"
}

build_docker() {
  local work="$DIR/work/docker"
  writable_copy docker "$work"
  (
    cd "$work"
    # moby is built in GOPATH mode upstream; its vendor.mod and vendor.sum are the module pins (vendor/ in the module
    # zip holds only modules.txt, which would switch the go command to vendor mode).
    rm -rf vendor && mv vendor.mod go.mod && mv vendor.sum go.sum
    gobuild "$BIN/dockerd" "-X github.com/docker/docker/dockerversion.Version=$DOCKER_VERSION \
-X github.com/docker/docker/dockerversion.GitCommit=v$DOCKER_VERSION" ./cmd/dockerd "$DOCKERD_TAGS"
  )
  rm -rf "$work"
}

build_containerd() {
  local work="$DIR/work/containerd" stamp="-X github.com/containerd/containerd/v2/version.Version=v$CONTAINERD_VERSION \
-X github.com/containerd/containerd/v2/version.Revision=v$CONTAINERD_VERSION \
-X github.com/containerd/containerd/v2/version.Package=github.com/containerd/containerd/v2"
  writable_copy containerd "$work"
  (
    cd "$work"
    [[ -x "$BIN/containerd" ]] || gobuild "$BIN/containerd" "$stamp" ./cmd/containerd "$CONTAINERD_TAGS"
    [[ -x "$BIN/containerd-shim-runc-v2" ]] || gobuild "$BIN/containerd-shim-runc-v2" "$stamp" ./cmd/containerd-shim-runc-v2 "$SHIM_TAGS"
    [[ -x "$BIN/ctr" ]] || gobuild "$BIN/ctr" "$stamp" ./cmd/ctr "$CTR_TAGS"
  )
  rm -rf "$work"
}

# The machine's runc (Debian's package), at least the lock's version, linked where the shim looks first.
link_runc() {
  local runc have
  runc="$(command -v runc || true)"
  [[ -n "$runc" ]] || die "runc is not installed (Debian's runc package; the testbed installs it with docker.io)"
  have="$("$runc" --version | sed -n 's/^runc version \([0-9][0-9.]*\).*/\1/p')"
  [[ -n "$have" ]] && [[ "$(printf '%s\n%s\n' "$RUNC_MIN" "$have" | sort -V | head -n 1)" == "$RUNC_MIN" ]] ||
    die "$runc is version '${have:-unknown}'; setup/engine.lock needs at least $RUNC_MIN"
  ln -sfn "$runc" "$BIN/runc"
}

if [[ "$MODE" == check ]]; then
  complete || { log "not built: $DIR"; exit 2; }
  printf '%s\n' "$BIN"
  exit 0
fi

if ! complete; then
  command -v go >/dev/null || die "the go command is needed to build Docker Engine $DOCKER_VERSION (it is not cached in $DIR)"
  mkdir -p "$BIN"
  # One build at a time per cache (two testbed runs may start together): a second run waits, then finds the binaries.
  exec 7>"$CACHE_ROOT/.build.lock"
  flock -n 7 || { log "another setup/engine.sh is building into $CACHE_ROOT; waiting for it (up to 60 min)"; flock -w 3600 7; } ||
    die "timed out after 3600s waiting for the other engine build (lock $CACHE_ROOT/.build.lock)"
  if [[ ! -x "$BIN/dockerd" ]]; then
    run_step "building dockerd $DOCKER_VERSION from the Go module proxy" 480 "$DIR/build-docker.log" build_docker || exit 1
  fi
  if [[ ! -x "$BIN/containerd" || ! -x "$BIN/containerd-shim-runc-v2" || ! -x "$BIN/ctr" ]]; then
    run_step "building containerd $CONTAINERD_VERSION, its runc shim and ctr from the Go module proxy" 300 \
      "$DIR/build-containerd.log" build_containerd || exit 1
  fi
  link_runc
  rm -rf "$DIR/work"
  complete || die "the build left $BIN incomplete"
  log "Docker Engine $DOCKER_VERSION with containerd $CONTAINERD_VERSION: built ($BIN)"
fi
printf '%s\n' "$BIN"

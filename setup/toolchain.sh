#!/usr/bin/env bash
# Provide the Pulumi toolchain this project needs (CLI, Node language host, provider plugins) without
# downloading prebuilt binaries, and print or write the environment that puts it on PATH.
#
# Order of preference for every piece:
#   1. already installed (the `pulumi` on PATH or in ~/.pulumi/bin; plugins on PATH or in $PULUMI_HOME/plugins)
#   2. the official installer (CLI only, opt-in: set VCL_PULUMI_INSTALLER_URL to its script's address)
#   3. a build with the ordinary `go` command from the Go module proxy configured on this machine
# Builds land in ${XDG_CACHE_HOME:-$HOME/.cache}/vllm-cluster/toolchain/<component>-<version>/, outside the
# repository, keyed by version, so a second run only checks files and takes seconds.
#
# Usage:
#   bash setup/toolchain.sh              ensure everything; summary on stderr; exit 0 complete, 2 incomplete
#   bash setup/toolchain.sh --print-env  ensure, then print `export ...` lines on stdout (for eval)
#   bash setup/toolchain.sh --check      build nothing, only report what is there (exit 0 complete, 2 not)
#   bash setup/toolchain.sh --retry      forget remembered "not obtainable" answers and try again
#   source setup/env.sh                  the same as eval "$(bash setup/toolchain.sh --print-env)"
# Also writes <cache>/env.sh with the same export lines.
#
# Environment: VCL_TOOLCHAIN_CACHE (cache root), VCL_TOOLCHAIN_BUILD_JOBS (go build -p, default 1),
# VCL_TOOLCHAIN_NICE (default 10), VCL_TOOLCHAIN_RETRY_HOURS (how long a refusal is remembered, default 24).
set -euo pipefail

REPO_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
CACHE_ROOT="${VCL_TOOLCHAIN_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/vllm-cluster/toolchain}"
BUILD_JOBS="${VCL_TOOLCHAIN_BUILD_JOBS:-1}"
NICE_LEVEL="${VCL_TOOLCHAIN_NICE:-10}"
RETRY_HOURS="${VCL_TOOLCHAIN_RETRY_HOURS:-24}"

# The CLI version matches the @pulumi/pulumi SDK pinned in package.json (3.248 is the last one for Node 20).
PULUMI_VERSION="3.248.0"
# Newest sdk/v3 release whose module still carries the Node language host as a package; used only when the
# language host module of $PULUMI_VERSION cannot be had (see ensure_langhost).
LANGHOST_FALLBACK_VERSION="3.68.0"
CLIPBOARD_REPLACE="github.com/atotto/clipboard=github.com/tgummerer/clipboard@v0.0.0-20241001131231-d02d263e614e"
TF_SDK_FORK_REPLACE="github.com/hashicorp/terraform-plugin-sdk/v2=github.com/pulumi/terraform-plugin-sdk/v2@v2.0.0-20260318212141-5525259d096b"

MODE=ensure
for arg in "$@"; do
  case "$arg" in
    --print-env) MODE=print-env ;;
    --check) MODE=check ;;
    --retry) RETRY_HOURS=0 ;;
    -h | --help) awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "${BASH_SOURCE[0]}"; exit 0 ;;
    *) echo "toolchain.sh: unknown argument: $arg" >&2; exit 64 ;;
  esac
done

log() { echo "toolchain: $*" >&2; }

# Everything the go command does here: local toolchain only, no VCS stamping, quiet and gentle on a shared
# 2-core machine. GOFLAGS from the caller is kept and extended.
go_env() {
  env GOTOOLCHAIN=local CGO_ENABLED=0 GOFLAGS="${GOFLAGS:-} -buildvcs=false" "$@"
}

# The proxy answers for module versions that exist; for a nested module it may refuse (403) versions that
# exist in git. Remember such a refusal for RETRY_HOURS so warm runs stay fast.
remembered_refusal() { # dir
  local f="$1/unavailable"
  [[ -f "$f" ]] || return 1
  local age=$(($(date +%s) - $(stat -c %Y "$f")))
  ((age < RETRY_HOURS * 3600))
}

# go mod download -json <module@version>; on success prints the module directory, else the error text on
# stderr and returns 1.
module_dir() {
  local out proxy
  proxy="$(go env GOPROXY | sed 's/[,|]direct//g; s/^direct[,|]\{0,1\}//')"
  out="$(cd "$CACHE_ROOT" && GOPROXY="${proxy:-$(go env GOPROXY)}" go_env go mod download -json "$1" 2>&1)" || true
  local dir err
  dir="$(printf '%s\n' "$out" | sed -n 's/^\t"Dir": "\(.*\)",$/\1/p')"
  err="$(printf '%s\n' "$out" | sed -n 's/^\t"Error": "\(.*\)"$/\1/p')"
  if [[ -n "$dir" && -z "$err" ]]; then
    printf '%s\n' "$dir"
    return 0
  fi
  printf '%s\n' "${err:-$out}" | sed 's/\\n/\n/g; s/\\t/  /g' >&2
  return 1
}

# Commit (.Origin.Hash) and commit time (.Time) of a module version, as "hash time", read from the .info
# file that `go mod download` leaves in the module cache (its -json output omits Origin for cached modules).
module_origin() {
  local mod="${1%@*}" ver="${1##*@}" info
  (cd "$CACHE_ROOT" && go_env go mod download -json "$1" >/dev/null 2>&1) || true
  # Module cache paths escape upper-case letters as "!" + lower case.
  info="$(go env GOMODCACHE)/cache/download/$(printf '%s' "$mod" | sed 's/[A-Z]/!\L&/g')/@v/$ver.info"
  [[ -f "$info" ]] || return 1
  node -e 'const j=JSON.parse(require("fs").readFileSync(process.argv[1],"utf8"));
    if(!j.Origin||!j.Origin.Hash||!j.Time)process.exit(1);console.log(j.Origin.Hash+" "+j.Time)' "$info" 2>/dev/null
}

# Pseudo-version "<base>-YYYYmmddHHMMSS-<hash12>" of a commit with commit time (RFC 3339, UTC).
pseudo_version() { # base hash time
  local ts
  ts="$(date -u -d "$3" +%Y%m%d%H%M%S)"
  printf '%s-%s-%s\n' "$1" "$ts" "${2:0:12}"
}

# Build one main package in a throwaway wrapper module under <dir>/src; binary goes to <dir>/bin/<name>.
# Args: dir binary-name main-package@version ldflags tags "require mod@ver ..." "replace old=new@ver ..."
# shellcheck disable=SC2086 # $requires and $replaces are space-separated lists
go_build_in_wrapper() {
  local dir="$1" name="$2" pkgver="$3" ldflags="$4" tags="$5" requires="$6" replaces="$7"
  local src="$dir/src" started r
  started=$(date +%s)
  rm -rf "$src" && mkdir -p "$src" "$dir/bin"
  {
    cd "$src" &&
      go_env go mod init "vllmcluster.local/toolchain/$name" &&
      for r in $replaces; do go_env go mod edit -replace "$r" || exit 1; done &&
      for r in $requires; do go_env go mod edit -require "$r" || exit 1; done &&
      go_env go get "$pkgver" $requires &&
      nice -n "$NICE_LEVEL" env GOTOOLCHAIN=local CGO_ENABLED=0 GOFLAGS="${GOFLAGS:-} -buildvcs=false" \
        go build -p "$BUILD_JOBS" -trimpath -tags "$tags" -ldflags "$ldflags" -o "$dir/bin/$name.partial" \
        "${pkgver%@*}" &&
      mv "$dir/bin/$name.partial" "$dir/bin/$name"
  } >"$dir/build.log" 2>&1 </dev/null
  local rc=$?
  cd "$REPO_ROOT" || true
  if ((rc != 0)); then
    log "build of $name failed; last lines of $dir/build.log:"
    tail -n 15 "$dir/build.log" >&2
    return 1
  fi
  log "built $name in $(($(date +%s) - started)) s ($(du -h "$dir/bin/$name" | cut -f1))"
}

# ---------------------------------------------------------------------------------------------- CLI
CLI_BIN=""
LANGHOST_BIN=""
LANGHOST_NOTE=""

installed_pulumi_ok() { # path-to-pulumi -> 0 when its version is >= PULUMI_VERSION (same major)
  local v
  v="$("$1" version 2>/dev/null | sed 's/^v//')" || return 1
  [[ "$v" =~ ^3\.([0-9]+)\.([0-9]+) ]] || return 1
  local want_minor="${PULUMI_VERSION#3.}"
  want_minor="${want_minor%%.*}"
  ((BASH_REMATCH[1] >= want_minor)) && [[ -x "$(dirname "$1")/pulumi-language-nodejs" ]]
}

ensure_cli() {
  local found
  for found in "$(command -v pulumi 2>/dev/null || true)" "$HOME/.pulumi/bin/pulumi"; do
    # Our own cache dirs are on PATH after `source setup/env.sh`; they are handled below.
    [[ -n "$found" && -x "$found" && "$found" != "$CACHE_ROOT"/* ]] || continue
    if installed_pulumi_ok "$found"; then
      CLI_BIN="$(dirname "$found")"
      LANGHOST_BIN="$CLI_BIN"
      LANGHOST_NOTE="installed next to the CLI"
      return 0
    fi
  done

  local dir="$CACHE_ROOT/pulumi-v$PULUMI_VERSION"
  if [[ -x "$dir/bin/pulumi" ]]; then CLI_BIN="$dir/bin"; return 0; fi
  [[ "$MODE" == check ]] && return 1

  # Official installer (fetches a release archive); only where its site answers within a few seconds.
  if [[ -n "${VCL_PULUMI_INSTALLER_URL:-}" ]] &&
    curl -fsS --connect-timeout 5 --max-time 60 "$VCL_PULUMI_INSTALLER_URL" -o "$CACHE_ROOT/install.sh" 2>/dev/null &&
    sh "$CACHE_ROOT/install.sh" --version "$PULUMI_VERSION" --no-edit-path --install-root "$dir" >&2; then
    CLI_BIN="$dir/bin"
    LANGHOST_BIN="$dir/bin"
    LANGHOST_NOTE="official installer"
    return 0
  fi

  log "building pulumi v$PULUMI_VERSION from Go modules (10-25 min on 2 cores; log: $dir/build.log)"
  go_build_in_wrapper "$dir" pulumi "github.com/pulumi/pulumi/pkg/v3/cmd/pulumi@v$PULUMI_VERSION" \
    "-s -w -X github.com/pulumi/pulumi/sdk/v3/go/common/version.Version=v$PULUMI_VERSION" \
    "osusergo,grpcnotrace" \
    "github.com/pulumi/pulumi/pkg/v3@v$PULUMI_VERSION github.com/pulumi/pulumi/sdk/v3@v$PULUMI_VERSION" \
    "$CLIPBOARD_REPLACE" || return 1
  CLI_BIN="$dir/bin"
}

# ----------------------------------------------------------------------------------- language host
# The Node language host of v$PULUMI_VERSION is its own module without version tags, so it can only be
# fetched by the pseudo-version of the CLI's release commit. Where the proxy refuses that, fall back to the
# newest served sdk/v3 release that still had the host inside the sdk module (older protocol: no RunPlugin,
# so policy packs cannot run through it).
ensure_langhost() {
  [[ -n "$LANGHOST_BIN" ]] && return 0
  local primary="$CACHE_ROOT/pulumi-language-nodejs-v$PULUMI_VERSION"
  local fallback="$CACHE_ROOT/pulumi-language-nodejs-v$LANGHOST_FALLBACK_VERSION"
  if [[ -x "$primary/bin/pulumi-language-nodejs" ]]; then
    LANGHOST_BIN="$primary/bin"; LANGHOST_NOTE="v$PULUMI_VERSION"; return 0
  fi
  if [[ "$MODE" != check ]] && ! remembered_refusal "$primary"; then
    mkdir -p "$primary"
    local origin hash time pv
    # The release tag vX.Y.Z and sdk/vX.Y.Z name the same commit; a cached .info may lack the Origin.
    if origin="$(module_origin "github.com/pulumi/pulumi/sdk/v3@v$PULUMI_VERSION")" ||
      origin="$(module_origin "github.com/pulumi/pulumi@v$PULUMI_VERSION+incompatible")"; then
      read -r hash time <<<"$origin"
      pv="$(pseudo_version v3.0.0 "$hash" "$time")"
      local mod="github.com/pulumi/pulumi/sdk/nodejs/cmd/pulumi-language-nodejs/v3"
      if module_dir "$mod@$pv" >/dev/null 2>"$primary/unavailable.tmp"; then
        rm -f "$primary/unavailable.tmp"
        # The module's go.mod replaces pkg and sdk with local paths; pin both to the CLI's release instead.
        go_build_in_wrapper "$primary" pulumi-language-nodejs "$mod@$pv" \
          "-s -w -X github.com/pulumi/pulumi/sdk/v3/go/common/version.Version=v$PULUMI_VERSION" \
          "osusergo,grpcnotrace" \
          "$mod@$pv github.com/pulumi/pulumi/pkg/v3@v$PULUMI_VERSION github.com/pulumi/pulumi/sdk/v3@v$PULUMI_VERSION" \
          "$CLIPBOARD_REPLACE" && { LANGHOST_BIN="$primary/bin"; LANGHOST_NOTE="v$PULUMI_VERSION"; return 0; }
      else
        mv "$primary/unavailable.tmp" "$primary/unavailable"
        log "language host $mod@$pv not obtainable: $(head -c 300 "$primary/unavailable")"
      fi
    else
      echo "release commit of github.com/pulumi/pulumi/sdk/v3@v$PULUMI_VERSION unknown" >"$primary/unavailable"
    fi
  fi
  if [[ -x "$fallback/bin/pulumi-language-nodejs" ]]; then
    LANGHOST_BIN="$fallback/bin"; LANGHOST_NOTE="fallback v$LANGHOST_FALLBACK_VERSION (no policy packs)"; return 0
  fi
  [[ "$MODE" == check ]] && return 1
  log "building fallback Node language host from sdk/v3@v$LANGHOST_FALLBACK_VERSION"
  go_build_in_wrapper "$fallback" pulumi-language-nodejs \
    "github.com/pulumi/pulumi/sdk/v3/nodejs/cmd/pulumi-language-nodejs@v$LANGHOST_FALLBACK_VERSION" \
    "-s -w -X github.com/pulumi/pulumi/sdk/v3/go/common/version.Version=v$LANGHOST_FALLBACK_VERSION" \
    "osusergo,grpcnotrace" "github.com/pulumi/pulumi/sdk/v3@v$LANGHOST_FALLBACK_VERSION" "" || return 1
  LANGHOST_BIN="$fallback/bin"
  LANGHOST_NOTE="fallback v$LANGHOST_FALLBACK_VERSION (no policy packs)"
}

# --------------------------------------------------------------------------------------- providers
# Plugin version = the "pulumi.version" the installed npm package declares, so the binary always matches
# the SDK the program uses.
npm_plugin_version() { # npm package name
  node -e 'const p=require(process.argv[1]+"/package.json");console.log((p.pulumi&&p.pulumi.version)||p.version)' \
    "$REPO_ROOT/node_modules/$1" 2>/dev/null
}

declare -a PROVIDER_BINS=()
declare -a MISSING=()
declare -a SUMMARY=()

# Try to build a provider from its Go module. Provider modules live in a `provider/` subdirectory; the proxy
# is asked for the tag version and for the pseudo-version of the provider's release commit (the commit of
# the repository's vX.Y.Z tag, read from the root module's .Origin.Hash).
build_provider() { # name version dir
  local name="$1" ver="$2" dir="$3" major="${2%%.*}" mod main ldflags tags="" replaces="" origin root
  case "$name" in
    command)
      mod="github.com/pulumi/pulumi-command/provider"
      ldflags="-X github.com/pulumi/pulumi-command/provider/pkg/version.Version=v$ver" ;;
    random)
      mod="github.com/pulumi/pulumi-random/provider/v$major"
      ldflags="-X $mod/pkg/version.Version=$ver"
      replaces="$TF_SDK_FORK_REPLACE" ;;
    docker)
      mod="github.com/pulumi/pulumi-docker/provider/v$major"
      ldflags="-X $mod/pkg/version.Version=$ver"
      tags="no_compose"
      replaces="$TF_SDK_FORK_REPLACE" ;;
    *) return 1 ;;
  esac
  main="$mod/cmd/pulumi-resource-$name"
  root="github.com/pulumi/pulumi-$name@v$ver"
  ((major >= 2)) && root="$root+incompatible"

  local candidates=("$mod@v$ver") hash time base=v0.0.0
  ((major >= 2)) && base="v$major.0.0"
  if origin="$(module_origin "$root")"; then
    read -r hash time <<<"$origin"
    candidates+=("$mod@$(pseudo_version "$base" "$hash" "$time")")
  else
    echo "root module $root: not served" >>"$dir/unavailable.tmp"
  fi
  local c moddir=""
  for c in "${candidates[@]}"; do
    if moddir="$(module_dir "$c" 2>>"$dir/unavailable.tmp")"; then break; fi
    moddir=""
  done
  if [[ -z "$moddir" ]]; then
    mv "$dir/unavailable.tmp" "$dir/unavailable"
    return 1
  fi
  rm -f "$dir/unavailable.tmp"
  # Replaces that point into the provider's own repository (shim modules, git submodules) cannot be
  # satisfied from a module zip; say so instead of building something different.
  if grep -Eq '=>[[:space:]]*\.' "$moddir/go.mod"; then
    grep -E '=>[[:space:]]*\.' "$moddir/go.mod" | sed "s|^|$c has a local replace: |" >"$dir/unavailable"
    return 1
  fi
  go_build_in_wrapper "$dir" "pulumi-resource-$name" "$main@${c##*@}" "-s -w $ldflags" "$tags" "$c" "$replaces"
}

ensure_provider() { # npm package name, plugin name
  local pkg="$1" name="$2" ver
  ver="$(npm_plugin_version "$pkg")" || ver=""
  if [[ -z "$ver" ]]; then
    MISSING+=("pulumi-resource-$name (npm package $pkg is not installed: run npm ci)")
    return 0
  fi
  local dir="$CACHE_ROOT/pulumi-resource-$name-v$ver"
  local plugdir="${PULUMI_HOME:-$HOME/.pulumi}/plugins/resource-$name-v$ver"
  local ambient
  ambient="$(command -v "pulumi-resource-$name" 2>/dev/null || true)"
  if [[ -x "$dir/bin/pulumi-resource-$name" ]]; then
    PROVIDER_BINS+=("$dir/bin"); SUMMARY+=("pulumi-resource-$name v$ver: built ($dir/bin)"); return 0
  elif [[ -x "$plugdir/pulumi-resource-$name" ]]; then
    SUMMARY+=("pulumi-resource-$name v$ver: installed plugin ($plugdir)"); return 0
  elif [[ -n "$ambient" && "$ambient" != "$CACHE_ROOT"/* ]]; then
    SUMMARY+=("pulumi-resource-$name: on PATH ($ambient; version not checked)"); return 0
  fi
  mkdir -p "$dir"
  if [[ "$MODE" != check ]] && ! remembered_refusal "$dir"; then
    log "trying to build pulumi-resource-$name v$ver from Go modules"
    if build_provider "$name" "$ver" "$dir"; then
      PROVIDER_BINS+=("$dir/bin"); SUMMARY+=("pulumi-resource-$name v$ver: built ($dir/bin)"); return 0
    fi
  fi
  local why="not built"
  [[ -f "$dir/unavailable" ]] && why="$(tr '\n' ' ' <"$dir/unavailable" | head -c 400)"
  MISSING+=("pulumi-resource-$name v$ver: $why")
}

# ------------------------------------------------------------------------------------------- main
mkdir -p "$CACHE_ROOT"
if ! command -v go >/dev/null && [[ "$MODE" != check ]]; then
  log "the go command is needed to build the toolchain"
fi

ensure_cli || MISSING+=("pulumi v$PULUMI_VERSION (CLI): see $CACHE_ROOT/pulumi-v$PULUMI_VERSION/build.log")
ensure_langhost || MISSING+=("pulumi-language-nodejs: see $CACHE_ROOT/pulumi-language-nodejs-v*/build.log")
# The CLI prefers a language host in its own directory and warns about one found elsewhere on PATH, so link
# the chosen host next to a CLI that this script built.
if [[ "$MODE" != check && "$CLI_BIN" == "$CACHE_ROOT"/* && -n "$LANGHOST_BIN" && "$LANGHOST_BIN" != "$CLI_BIN" ]]; then
  ln -sfn "$LANGHOST_BIN/pulumi-language-nodejs" "$CLI_BIN/pulumi-language-nodejs"
  LANGHOST_BIN="$CLI_BIN"
fi
ensure_provider @pulumi/command command
ensure_provider @pulumi/random random
ensure_provider @pulumi/docker docker

DYNAMIC_DIR="$REPO_ROOT/node_modules/@pulumi/pulumi"
[[ -x "$DYNAMIC_DIR/pulumi-resource-pulumi-nodejs" ]] ||
  MISSING+=("pulumi-resource-pulumi-nodejs (from @pulumi/pulumi in node_modules: run npm ci)")

path_dirs=()
for d in "$CLI_BIN" "$LANGHOST_BIN" "${PROVIDER_BINS[@]}" "$DYNAMIC_DIR"; do
  [[ -n "$d" && -d "$d" ]] || continue
  [[ " ${path_dirs[*]} " == *" $d "* ]] || path_dirs+=("$d")
done
joined="$(IFS=:; echo "${path_dirs[*]}")"

env_lines="$(cat <<EOF
export PATH="$joined\${PATH:+:\$PATH}"
export PULUMI_SKIP_UPDATE_CHECK=true
export PULUMI_DISABLE_AUTOMATIC_PLUGIN_ACQUISITION=true
export PULUMI_BACKEND_URL="\${PULUMI_BACKEND_URL:-file://\${XDG_STATE_HOME:-\$HOME/.local/state}/vllm-cluster/pulumi-state}"
case "\$PULUMI_BACKEND_URL" in file://*) _vcl_state="\${PULUMI_BACKEND_URL#file://}"; mkdir -p "\${_vcl_state%%\?*}"; unset _vcl_state ;; esac
EOF
)"
[[ "$MODE" == check ]] || printf '%s\n' "$env_lines" >"$CACHE_ROOT/env.sh"

log "pulumi CLI: ${CLI_BIN:-MISSING}"
if [[ -n "$LANGHOST_BIN" ]]; then
  log "pulumi-language-nodejs: $(readlink -f "$LANGHOST_BIN/pulumi-language-nodejs")${LANGHOST_NOTE:+ ($LANGHOST_NOTE)}"
else
  log "pulumi-language-nodejs: MISSING"
fi
for s in "${SUMMARY[@]}"; do log "$s"; done
for m in "${MISSING[@]}"; do log "MISSING: $m"; done

if [[ "$MODE" == print-env ]]; then
  printf '%s\n' "$env_lines"
  [[ -n "$CLI_BIN" && -n "$LANGHOST_BIN" ]] || exit 1
  exit 0
fi
((${#MISSING[@]} == 0)) || exit 2

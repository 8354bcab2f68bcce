#!/usr/bin/env bash
# Provide the Pulumi toolchain this project runs, at the versions pinned in setup/toolchain.lock: the CLI, the
# Node language host and the provider plugins command, random and docker; on request (--languages) also the Python
# and YAML language hosts, which only programs in those languages need. Prints (or writes) the environment that
# puts it on PATH with offline settings.
#
# For every piece, in this order:
#   1. already installed: a `pulumi` on PATH (or in ~/.pulumi/bin) with the language host next to it, as the
#      official installer leaves it; a plugin already in $PULUMI_HOME/plugins at the pinned version, as
#      `pulumi plugin install resource <name> <version>` leaves it. On a machine with internet access that is
#      the normal way: install Pulumi with its installer, then `pulumi plugin install`.
#   2. a binary this script built before, cached outside the repository under
#      ${VCL_TOOLCHAIN_CACHE:-${XDG_CACHE_HOME:-~/.cache}/vllm-cluster/toolchain}/<piece>-v<version>-<sum>/,
#      keyed by version and by the sha256 of the source archives it came from.
#   3. a build with `go`: the CLI from the Go module proxy; the language host and the plugins from the source
#      archives in the directory given by --sources DIR or VCL_PULUMI_SOURCES, else ../shared/pulumi-sources next
#      to this repository or to the local repository it was cloned from (each archive's sha256 must equal the
#      lock file's, or it is refused naming the archive), with their other dependencies from the proxy.
#      Built plugins are installed with `pulumi plugin install resource <name> <version> --file <binary>`.
#
# Usage:
#   bash setup/toolchain.sh [--sources DIR]              ensure everything; progress and summary on stderr
#   bash setup/toolchain.sh [--sources DIR] --print-env  ensure, then print `export ...` lines (for eval)
#   bash setup/toolchain.sh --check                      build nothing; report; exit 0 complete, 2 not
#   ... --languages python,yaml                          also the Python and/or YAML language host (any mode above)
#   source setup/env.sh                                  eval of --print-env
# Exit: 0 complete; 1 a build or an archive check failed (the message names it); 2 (--check) incomplete.
#
# Environment: VCL_PULUMI_SOURCES (archive directory), VCL_TOOLCHAIN_CACHE (cache root),
# VCL_TOOLCHAIN_BUILD_JOBS (go build -p, default: number of CPUs), VCL_TOOLCHAIN_NICE (default 10),
# VCL_PULUMI_INSTALLER_URL (opt-in: the official installer script's address, for the CLI only),
# VCL_TOOLCHAIN_LANGUAGES (the default of --languages).
# A cold build takes about 20-25 minutes on 2 cores (plus module downloads), the two extra language hosts a few
# minutes more; a warm run about a second. A Python program also needs python3 and, in its virtualenv, the `pulumi`
# package from PyPI at the CLI's version.
set -euo pipefail

REPO_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
LOCK="$REPO_ROOT/setup/toolchain.lock"
CACHE_ROOT="${VCL_TOOLCHAIN_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/vllm-cluster/toolchain}"
# shellcheck disable=SC2034 # read by gobuild.bash
BUILD_JOBS="${VCL_TOOLCHAIN_BUILD_JOBS:-$(nproc 2>/dev/null || echo 2)}"
# shellcheck disable=SC2034 # read by gobuild.bash
NICE_LEVEL="${VCL_TOOLCHAIN_NICE:-10}"
SOURCES="${VCL_PULUMI_SOURCES:-}"
# Where the archives are looked for when neither --sources nor VCL_PULUMI_SOURCES names them: next to this
# repository, then next to the repository it was cloned from when that is a local path (a clone made elsewhere,
# e.g. under mktemp -d, still finds them).
source_candidates() {
  local origin
  printf '%s\n' "$REPO_ROOT/../shared/pulumi-sources"
  origin="$(git -C "$REPO_ROOT" remote get-url origin 2>/dev/null || true)"
  origin="${origin#file://}"
  if [[ "$origin" == /* ]]; then printf '%s\n' "${origin%/.git}/../shared/pulumi-sources"; fi
}
PULUMI_HOME_DIR="${PULUMI_HOME:-$HOME/.pulumi}"
# The CLI's own go.mod replaces this module; a wrapper module building the CLI must repeat the replace.
CLIPBOARD_REPLACE="github.com/atotto/clipboard=github.com/tgummerer/clipboard@v0.0.0-20241001131231-d02d263e614e"

MODE=ensure
LANGUAGES="${VCL_TOOLCHAIN_LANGUAGES:-}"
while (($# > 0)); do
  case "$1" in
    --print-env) MODE=print-env ;;
    --check) MODE=check ;;
    --languages) LANGUAGES="${2?--languages needs a list, e.g. python,yaml}"; shift ;;
    --languages=*) LANGUAGES="${1#--languages=}" ;;
    --sources) SOURCES="${2:?--sources needs a directory}"; shift ;;
    --sources=*) SOURCES="${1#--sources=}" ;;
    -h | --help) awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "${BASH_SOURCE[0]}"; exit 0 ;;
    *) echo "toolchain.sh: unknown argument: $1 (see --help)" >&2; exit 64 ;;
  esac
  shift
done

log() { echo "toolchain: $*" >&2; }
die() { echo "toolchain: ERROR: $*" >&2; exit 1; }

for _lang in $(tr ',' ' ' <<<"$LANGUAGES"); do
  case "$_lang" in
    nodejs | python | yaml) ;;
    *) echo "toolchain.sh: --languages: unknown language '$_lang' (known: nodejs, python, yaml)" >&2; exit 64 ;;
  esac
done
unset _lang

# ------------------------------------------------------------------------------------------ lock file
# lock_field KIND NAME COLUMN: one field of a lock row (columns: 3 version, 4 archive, 5 sha256, 6 origin).
lock_field() {
  awk -F'\t' -v k="$1" -v n="$2" -v c="$3" '!/^#/ && $1 == k && $2 == n { print $c; found = 1 } END { exit !found }' "$LOCK" ||
    die "setup/toolchain.lock has no row '$1 $2'"
}
PULUMI_VERSION="$(lock_field cli pulumi 3)"

# Short key of the archives a build uses (their pinned sums), so a changed pin never reuses an old binary.
sums_key() { # "kind name" ...
  local spec out=""
  # shellcheck disable=SC2086 # each spec is "kind name", two words on purpose
  for spec in "$@"; do out+="$(lock_field $spec 5)"; done
  printf '%s' "$out" | sha256sum | cut -c1-12
}

# archive KIND NAME: verified path of the row's archive in $SOURCES, or exit naming what is wrong.
archive() {
  local file sum want
  file="$(lock_field "$1" "$2" 4)"
  want="$(lock_field "$1" "$2" 5)"
  if [[ -z "$SOURCES" ]]; then
    local tried="" dir
    while IFS= read -r dir; do
      if [[ -d "$dir" ]]; then SOURCES="$(cd "$dir" && pwd)"; break; fi
      tried+=" $dir"
    done < <(source_candidates)
    [[ -n "$SOURCES" ]] || die "building $2 needs the source archive $file; no archive directory at:$tried. \
Pass --sources DIR or set VCL_PULUMI_SOURCES (on a machine with internet access, install the official binaries \
instead; see docs/testing.md, Toolchain)"
  fi
  [[ -f "$SOURCES/$file" ]] || die "source archive $file is not in $SOURCES"
  sum="$(sha256sum "$SOURCES/$file" | cut -d' ' -f1)"
  [[ "$sum" == "$want" ]] || die "source archive $file: sha256 $sum does not match setup/toolchain.lock ($want); refusing it"
  printf '%s\n' "$SOURCES/$file"
}

# unpack KIND NAME DEST: the verified archive's single top folder becomes DEST.
unpack() {
  local tarball dest="$3"
  tarball="$(archive "$1" "$2")" || exit 1
  rm -rf "$dest" "$dest.tmp" && mkdir -p "$dest.tmp"
  tar -xzf "$tarball" -C "$dest.tmp" --strip-components=1 || die "cannot unpack $tarball"
  mv "$dest.tmp" "$dest"
}

# Progress reports (run_step) and the go command (gocmd, gobuild), shared with setup/engine.sh.
# shellcheck source=gobuild.bash
source "$REPO_ROOT/setup/gobuild.bash"

# ----------------------------------------------------------------------------------------------- CLI
CLI_BIN=""

installed_cli_ok() { # path-to-pulumi: version >= the pinned one (same major) and a language host next to it
  local v
  v="$("$1" version 2>/dev/null | sed 's/^v//')" || return 1
  [[ "$v" =~ ^3\.([0-9]+)\. ]] || return 1
  local want="${PULUMI_VERSION#3.}"
  ((BASH_REMATCH[1] >= ${want%%.*})) && [[ -x "$(dirname "$1")/pulumi-language-nodejs" ]]
}

build_cli() { # dir
  local dir="$1" src="$1/src"
  rm -rf "$src" && mkdir -p "$src" "$dir/bin"
  (
    cd "$src"
    gocmd mod init vllmcluster.local/toolchain/pulumi
    gocmd mod edit -replace "$CLIPBOARD_REPLACE"
    gocmd get "github.com/pulumi/pulumi/pkg/v3/cmd/pulumi@v$PULUMI_VERSION" \
      "github.com/pulumi/pulumi/pkg/v3@v$PULUMI_VERSION" "github.com/pulumi/pulumi/sdk/v3@v$PULUMI_VERSION"
    gobuild "$dir/bin/pulumi" "-X github.com/pulumi/pulumi/sdk/v3/go/common/version.Version=v$PULUMI_VERSION" \
      github.com/pulumi/pulumi/pkg/v3/cmd/pulumi osusergo,grpcnotrace
  )
  rm -rf "$src"
}

ensure_cli() {
  local found
  for found in "$(command -v pulumi 2>/dev/null || true)" "$HOME/.pulumi/bin/pulumi"; do
    [[ -n "$found" && -x "$found" && "$found" != "$CACHE_ROOT"/* ]] || continue
    if installed_cli_ok "$found"; then CLI_BIN="$(dirname "$found")"; SUMMARY+=("pulumi: installed ($found)"); return 0; fi
  done
  local dir="$CACHE_ROOT/pulumi-v$PULUMI_VERSION"
  if [[ ! -x "$dir/bin/pulumi" ]]; then
    [[ "$MODE" != check ]] || { MISSING+=("pulumi v$PULUMI_VERSION (CLI)"); return 0; }
    mkdir -p "$dir"
    if [[ -n "${VCL_PULUMI_INSTALLER_URL:-}" ]] &&
      curl -fsS --connect-timeout 5 --max-time 120 "$VCL_PULUMI_INSTALLER_URL" -o "$dir/install.sh" &&
      sh "$dir/install.sh" --version "$PULUMI_VERSION" --no-edit-path --install-root "$dir" >&2; then
      CLI_BIN="$dir/bin"; SUMMARY+=("pulumi v$PULUMI_VERSION: official installer ($dir/bin)"); return 0
    fi
    : >"$dir/build.log"
    run_step "building the pulumi CLI v$PULUMI_VERSION from the Go module proxy" 240 "$dir/build.log" build_cli "$dir" || exit 1
  fi
  CLI_BIN="$dir/bin"
  SUMMARY+=("pulumi v$PULUMI_VERSION: built ($dir/bin)")
}

# ------------------------------------------------------------------------------------ language hosts
# The Node and Python hosts live in the pulumi monorepo; their go.mod points pkg and sdk at the monorepo's folders:
# pin both to the host's release (the CLI's) instead.
build_monorepo_host() { # dir name
  local dir="$1" name="$2" work="$1/work" ver
  ver="$(lock_field language "$name" 3)"
  unpack language "$name" "$work"
  (
    cd "$work/sdk/$name/cmd/pulumi-language-$name"
    gocmd mod edit -dropreplace github.com/pulumi/pulumi/pkg/v3 -dropreplace github.com/pulumi/pulumi/sdk/v3 \
      -require "github.com/pulumi/pulumi/pkg/v3@v$ver" -require "github.com/pulumi/pulumi/sdk/v3@v$ver"
    gocmd mod tidy
    gobuild "$dir/bin/pulumi-language-$name" "-X github.com/pulumi/pulumi/sdk/v3/go/common/version.Version=v$ver" . osusergo,grpcnotrace
  )
  rm -rf "$work"
}

build_language_nodejs() { build_monorepo_host "$1" nodejs; }

build_language_python() { # dir
  local sdk
  build_monorepo_host "$1" python || return 1
  # The host runs a program as `python <pulumi-language-python-exec> ...`, a script it expects next to itself. The
  # script is part of the sdk module the host was just built with (not of the host's folder in the archive).
  sdk="$(cd "$1" && gocmd mod download -json "github.com/pulumi/pulumi/sdk/v3@v$(lock_field language python 3)" |
    sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p')"
  [[ -f "$sdk/python/cmd/pulumi-language-python-exec" ]] || { echo "no python/cmd/pulumi-language-python-exec in '$sdk'"; return 1; }
  install -m 0755 "$sdk/python/cmd/pulumi-language-python-exec" "$1/bin/pulumi-language-python-exec"
}

build_language_yaml() { # dir
  local dir="$1" work="$1/work" ver
  ver="$(lock_field language yaml 3)"
  unpack language yaml "$work"
  # Built as its go.mod has it: pulumi pkg and sdk v3.253.0, newer than the CLI (the engine speaks to it over gRPC
  # only). Pinned to the CLI's v3.248.0 it does not compile (pkg/server/server.go: undefined:
  # providersdk.NewHostClient), nor does v1.37.0, the last release before the CLI's, against v3.248.0's pkg.
  # The version must be semver: the CLI parses it before it asks the host for anything.
  (cd "$work" &&
    gobuild "$dir/bin/pulumi-language-yaml" "-X github.com/pulumi/pulumi-yaml/pkg/version.Version=$ver" \
      ./cmd/pulumi-language-yaml osusergo,grpcnotrace)
  rm -rf "$work"
}

# ensure_language NAME LABEL ESTIMATE [EXTRA-FILE]: the language host next to the CLI, which finds it there as an
# official install has it; EXTRA-FILE is another file the build leaves in bin/ that must go next to it too.
ensure_language() {
  local name="$1" label="$2" est="$3" extra="${4:-}" ver dir f
  [[ -n "$CLI_BIN" ]] || return 0
  ver="$(lock_field language "$name" 3)"
  if [[ "$CLI_BIN" != "$CACHE_ROOT"/* ]]; then # an installed CLI carries its own
    [[ -x "$CLI_BIN/pulumi-language-$name" ]] || MISSING+=("pulumi-language-$name next to $CLI_BIN/pulumi (an official install has it)")
    return 0
  fi
  dir="$CACHE_ROOT/language-$name-v$ver-$(sums_key "language $name")"
  if [[ ! -x "$dir/bin/pulumi-language-$name" || (-n "$extra" && ! -f "$dir/bin/$extra") ]]; then
    [[ "$MODE" != check ]] || { MISSING+=("pulumi-language-$name v$ver"); return 0; }
    archive language "$name" >/dev/null
    mkdir -p "$dir/bin" && : >"$dir/build.log"
    run_step "building the $label language host v$ver from its source archive" "$est" "$dir/build.log" \
      "build_language_$name" "$dir" || exit 1
  fi
  if [[ "$MODE" != check ]]; then
    for f in "pulumi-language-$name" $extra; do ln -sfn "$dir/bin/$f" "$CLI_BIN/$f"; done
  fi
  SUMMARY+=("pulumi-language-$name v$ver: built ($dir/bin)")
}

ensure_langhost() {
  ensure_language nodejs Node 90
  [[ -n "$CLI_BIN" && "$CLI_BIN" == "$CACHE_ROOT"/* ]] || return 0
  # The dynamic-provider launcher goes next to the CLI too, as an official install has it.
  local launcher="$REPO_ROOT/node_modules/@pulumi/pulumi/pulumi-resource-pulumi-nodejs"
  if [[ "$MODE" != check && -f "$launcher" ]]; then install -m 0755 "$launcher" "$CLI_BIN/pulumi-resource-pulumi-nodejs"; fi
  [[ -x "$CLI_BIN/pulumi-resource-pulumi-nodejs" ]] ||
    MISSING+=("pulumi-resource-pulumi-nodejs (copied from @pulumi/pulumi in node_modules: run npm ci first)")
}

# The languages asked for besides Node (--languages), each once.
ensure_requested_languages() {
  local lang
  for lang in $(tr ',' '\n' <<<"$LANGUAGES" | sort -u); do
    case "$lang" in
      nodejs) ;;
      python) ensure_language python Python 180 pulumi-language-python-exec ;;
      yaml) ensure_language yaml YAML 240 ;;
    esac
  done
}

# ------------------------------------------------------------------------------------------ providers
build_command() { # dir version
  local dir="$1" ver="$2" work="$1/work"
  unpack resource command "$work"
  (cd "$work/provider" &&
    gobuild "$dir/bin/pulumi-resource-command" "-X github.com/pulumi/pulumi-command/provider/pkg/version.Version=$ver" \
      ./cmd/pulumi-resource-command)
  rm -rf "$work"
}

build_random() { # dir version
  local dir="$1" ver="$2" work="$1/work"
  unpack resource random "$work/random"
  unpack source pulumi-yaml "$work/yaml"
  unpack source pulumi-dotnet "$work/dotnet"
  (
    cd "$work/random/provider"
    # The proxy refuses these two pseudo-versions; the archives are the same commits.
    gocmd mod edit -replace "github.com/pulumi/pulumi-yaml=$work/yaml" \
      -replace "github.com/pulumi/pulumi-dotnet/pulumi-language-dotnet/v3=$work/dotnet/pulumi-language-dotnet"
    VERSION="$ver" gocmd generate cmd/pulumi-resource-random/main.go # writes the embedded schema-embed.json
    gobuild "$dir/bin/pulumi-resource-random" "-X github.com/pulumi/pulumi-random/provider/v4/pkg/version.Version=$ver" \
      ./cmd/pulumi-resource-random
  )
  rm -rf "$work"
}

build_docker() { # dir version
  local dir="$1" ver="$2" work="$1/work" p
  unpack resource docker "$work/docker"
  unpack source terraform-provider-docker "$work/docker/upstream"
  unpack source pulumi-terraform-bridge "$work/bridge"
  (
    # The upstream submodule with the provider's patches applied, as its `scripts/upstream.sh init` does.
    cd "$work/docker/upstream"
    git init -q && git add -A && git -c user.name=toolchain -c user.email=toolchain@localhost commit -qm upstream
    for p in ../patches/*.patch; do git apply --3way --allow-empty "$p" || { echo "patch $p does not apply"; exit 1; }; done
    cd ../provider
    gocmd mod edit -replace "github.com/pulumi/pulumi-terraform-bridge/v3=$work/bridge" # the proxy refuses v3.126.0
    VERSION="$ver" gocmd generate cmd/pulumi-resource-docker/main.go
    gobuild "$dir/bin/pulumi-resource-docker" "-X github.com/pulumi/pulumi-docker/provider/v5/pkg/version.Version=$ver" \
      ./cmd/pulumi-resource-docker
  )
  rm -rf "$work"
}

# Plugin version the installed npm package declares: the binary must match the SDK the program uses.
npm_plugin_version() { # npm package
  node -e 'const p=require(process.argv[1]+"/package.json");console.log((p.pulumi&&p.pulumi.version)||p.version)' \
    "$REPO_ROOT/node_modules/$1" 2>/dev/null
}

ensure_provider() { # name estimate-seconds sources-for-key...
  local name="$1" est="$2" ver npmver
  shift 2
  ver="$(lock_field resource "$name" 3)"
  npmver="$(npm_plugin_version "@pulumi/$name" || true)"
  if [[ -n "$npmver" && "$npmver" != "$ver" ]]; then
    die "@pulumi/$name in node_modules declares plugin version $npmver, setup/toolchain.lock pins $ver: run npm ci"
  fi
  local plugdir="$PULUMI_HOME_DIR/plugins/resource-$name-v$ver"
  local dir
  dir="$CACHE_ROOT/resource-$name-v$ver-$(sums_key "resource $name" "$@")"
  local bin="$dir/bin/pulumi-resource-$name"
  if [[ -x "$plugdir/pulumi-resource-$name" ]] && { [[ ! -x "$bin" ]] || cmp -s "$bin" "$plugdir/pulumi-resource-$name"; }; then
    SUMMARY+=("pulumi-resource-$name v$ver: installed plugin ($plugdir)")
    return 0
  fi
  if [[ ! -x "$bin" ]]; then
    [[ "$MODE" != check ]] || { MISSING+=("pulumi-resource-$name v$ver"); return 0; }
    local spec
    # shellcheck disable=SC2086 # "kind name"
    for spec in "resource $name" "$@"; do archive $spec >/dev/null; done # refuse a wrong archive before building
    mkdir -p "$dir/bin" && : >"$dir/build.log"
    run_step "building the $name provider plugin v$ver from its source archives" "$est" "$dir/build.log" \
      "build_$name" "$dir" "$ver" || exit 1
  fi
  [[ "$MODE" != check ]] || { MISSING+=("pulumi-resource-$name v$ver (built, not installed)"); return 0; }
  "$CLI_BIN/pulumi" plugin install resource "$name" "$ver" --file "$bin" --reinstall >&2 ||
    die "pulumi plugin install resource $name $ver --file $bin failed"
  SUMMARY+=("pulumi-resource-$name v$ver: built ($bin), installed into $plugdir")
}

# ----------------------------------------------------------------------------------------------- main
declare -a SUMMARY=() MISSING=()
mkdir -p "$CACHE_ROOT"
if [[ "$MODE" != check ]]; then
  command -v go >/dev/null || log "note: the go command is needed if anything has to be built"
  [[ -z "$SOURCES" || -d "$SOURCES" ]] || die "source archive directory $SOURCES does not exist"
  [[ -z "$SOURCES" ]] || SOURCES="$(cd "$SOURCES" && pwd)"
fi

# One build at a time per cache (the demo and the test suite may start together): a second run waits, then finds
# what the first built.
if [[ "$MODE" != check ]] && command -v flock >/dev/null; then
  exec 7>"$CACHE_ROOT/.build.lock"
  flock -n 7 || { log "another setup/toolchain.sh is building into $CACHE_ROOT; waiting for it (up to 60 min)"; flock -w 3600 7; } ||
    die "timed out after 3600s waiting for the other toolchain build (lock $CACHE_ROOT/.build.lock)"
fi

ensure_cli
ensure_langhost
ensure_requested_languages
if [[ -n "$CLI_BIN" ]]; then
  ensure_provider command 100
  ensure_provider random 480 "source pulumi-yaml" "source pulumi-dotnet"
  ensure_provider docker 480 "source terraform-provider-docker" "source pulumi-terraform-bridge"
fi

env_lines="$(cat <<EOF
export PATH="$CLI_BIN\${PATH:+:\$PATH}"
export PULUMI_SKIP_UPDATE_CHECK=true
export PULUMI_DISABLE_AUTOMATIC_PLUGIN_ACQUISITION=true
export PULUMI_IGNORE_AMBIENT_PLUGINS=true
export PULUMI_BACKEND_URL="\${PULUMI_BACKEND_URL:-file://\${XDG_STATE_HOME:-\$HOME/.local/state}/vllm-cluster/pulumi-state}"
case "\$PULUMI_BACKEND_URL" in file://*) _vcl_state="\${PULUMI_BACKEND_URL#file://}"; mkdir -p "\${_vcl_state%%\?*}"; unset _vcl_state ;; esac
EOF
)"
[[ "$MODE" == check ]] || printf '%s\n' "$env_lines" >"$CACHE_ROOT/env.sh"

for s in "${SUMMARY[@]}"; do log "$s"; done
for m in "${MISSING[@]}"; do log "MISSING: $m"; done
if [[ "$MODE" == print-env ]]; then
  printf '%s\n' "$env_lines"
fi
((${#MISSING[@]} == 0)) || { [[ "$MODE" == check ]] && exit 2; exit 1; }

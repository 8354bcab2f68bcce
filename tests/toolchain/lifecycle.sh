#!/usr/bin/env bash
# Lifecycle test of the Pulumi toolchain that setup/toolchain.sh provides, run against throwaway programs in
# a temporary directory with a file backend:
#   stage 1 (core): CLI + Node language host + TypeScript + dynamic provider (pulumi-resource-pulumi-nodejs)
#   stage 2 (providers): random.RandomPassword, command local.Command and docker.Container on this machine's
#            own dockerd (started here if it is not running and we are root)
# Each stage: preview, up, up --expect-no-changes, destroy, with the outcome checked after each step.
# A missing provider plugin fails stage 2, naming it.
# Ends with "N passed, M failed" (tests/lib/results.sh).
# shellcheck disable=SC2317 # functions are called after an early `finish` path
set -uo pipefail

REPO_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
# shellcheck source=../lib/results.sh
source "$REPO_ROOT/tests/lib/results.sh"

# ------------------------------------------------------------------------------------------ setup
toolchain_env="$(bash "$REPO_ROOT/setup/toolchain.sh" --print-env)"
toolchain_rc=$?
eval "$toolchain_env"
if ((toolchain_rc != 0)) || ! command -v pulumi >/dev/null; then
  fail "toolchain: pulumi CLI and Node language host available (setup/toolchain.sh exit $toolchain_rc)"
  finish
fi
pass "toolchain: $(command -v pulumi) $(pulumi version)"

WORK="$(mktemp -d "${TMPDIR:-/tmp}/vcl-toolchain-lifecycle.XXXXXX")"
CONTAINER_NAME="vcl-toolchain-lifecycle-$$"
IMAGE_TAG="vcl-toolchain-lifecycle:$$"
cleanup() {
  if command -v docker >/dev/null && docker info >/dev/null 2>&1; then
    docker rm -f "$CONTAINER_NAME" >/dev/null 2>&1 || true
    docker rmi -f "$IMAGE_TAG" >/dev/null 2>&1 || true
  fi
  rm -rf "$WORK"
}
trap cleanup EXIT

export PULUMI_BACKEND_URL="file://$WORK/state"
export PULUMI_CONFIG_PASSPHRASE="lifecycle-test"
export PULUMI_SKIP_UPDATE_CHECK=true PULUMI_DISABLE_AUTOMATIC_PLUGIN_ACQUISITION=true
mkdir -p "$WORK/state"

# A program directory that uses the repository's installed node_modules (same SDK and provider packages).
new_program() { # dir name
  mkdir -p "$1"
  ln -s "$REPO_ROOT/node_modules" "$1/node_modules"
  cat >"$1/Pulumi.yaml" <<EOF
name: $2
runtime:
  name: nodejs
  options:
    typescript: true
main: index.ts
EOF
  cat >"$1/package.json" <<EOF
{ "name": "$2", "private": true, "main": "index.ts", "dependencies": $(
    cd "$REPO_ROOT" && node -e 'console.log(JSON.stringify(require("./package.json").dependencies))') }
EOF
  cat >"$1/tsconfig.json" <<'EOF'
{ "compilerOptions": { "strict": true, "target": "es2020", "module": "commonjs", "moduleResolution": "node",
  "esModuleInterop": true, "skipLibCheck": true }, "files": ["index.ts"] }
EOF
}

run() { # log-name command... ; output in $WORK/<log-name>.log, shown on failure
  local name="$1"; shift
  if "$@" >"$WORK/$name.log" 2>&1; then return 0; fi
  echo "---- $name: $* (last 25 lines)"; tail -n 25 "$WORK/$name.log"; echo "----"
  return 1
}

resource_count() { # stack -> number of non-stack, non-provider resources in the state
  pulumi stack export --stack "$1" 2>/dev/null | node -e '
    let s="";process.stdin.on("data",d=>s+=d).on("end",()=>{const r=(JSON.parse(s).deployment.resources||[])
      .filter(x=>!x.type.startsWith("pulumi:"));console.log(r.length)})'
}

# ------------------------------------------------------------------------- stage 1: core toolchain
P1="$WORK/core"
new_program "$P1" vcl-toolchain-core
cat >"$P1/index.ts" <<EOF
import * as pulumi from "@pulumi/pulumi";

// A dynamic provider exercises pulumi-resource-pulumi-nodejs from the SDK package.
const provider: pulumi.dynamic.ResourceProvider = {
    async create(inputs: { text: string }) {
        return { id: "static-" + inputs.text, outs: { text: inputs.text, length: inputs.text.length } };
    },
};

class Echo extends pulumi.dynamic.Resource {
    public readonly length!: pulumi.Output<number>;
    constructor(name: string, text: string) {
        super(provider, name, { text, length: undefined }, {});
    }
}

const echo = new Echo("echo", "lifecycle");
export const echoLength = echo.length;
export const greeting = "hello from " + pulumi.getStack();
EOF
cd "$P1" || exit 1
  check "core: stack init" run core-init pulumi stack init core --non-interactive
  check "core: preview" run core-preview pulumi preview --non-interactive
  check "core: up" run core-up pulumi up --yes --non-interactive --skip-preview
  check "core: outputs after up" test "$(pulumi stack output echoLength 2>/dev/null)" = 9 -a \
    "$(pulumi stack output greeting 2>/dev/null)" = "hello from core"
  check "core: second up reports no changes" run core-noop pulumi up --yes --non-interactive --expect-no-changes
  check "core: destroy" run core-destroy pulumi destroy --yes --non-interactive --skip-preview
  check "core: nothing left in state" test "$(resource_count core)" = 0
  pulumi stack rm --yes --force core >/dev/null 2>&1
cd "$REPO_ROOT" || exit 1

# -------------------------------------------------------------------------- stage 2: providers
plugin_available() { # name version
  command -v "pulumi-resource-$1" >/dev/null && return 0
  [[ -x "${PULUMI_HOME:-$HOME/.pulumi}/plugins/resource-$1-v$2/pulumi-resource-$1" ]]
}
missing=()
for p in command random docker; do
  v="$(node -p "require('$REPO_ROOT/node_modules/@pulumi/$p/package.json').pulumi.version" 2>/dev/null)"
  plugin_available "$p" "$v" || missing+=("pulumi-resource-$p v$v")
done

P2="$WORK/providers"
new_program "$P2" vcl-toolchain-providers
MARKER="$WORK/command-marker"
cat >"$P2/index.ts" <<EOF
import * as command from "@pulumi/command";
import * as docker from "@pulumi/docker";
import * as random from "@pulumi/random";

const password = new random.RandomPassword("password", { length: 20, special: false });

const marker = new command.local.Command("marker", {
    create: "printf created > '$MARKER'",
    delete: "rm -f '$MARKER'",
});

const container = new docker.Container("sleeper", {
    name: "$CONTAINER_NAME",
    image: "$IMAGE_TAG",
    command: ["/sleeper"],
    mustRun: true,
    networkMode: "none",
    labels: [{ label: "vllm-cluster.lifecycle-test", value: "true" }],
});

export const passwordValue = password.result;
export const markerStdout = marker.stdout;
export const containerName = container.name;
EOF

if ((${#missing[@]} > 0)); then
  fail "providers: plugin(s) installed at the versions the npm packages declare: missing ${missing[*]} (run setup/toolchain.sh --sources DIR)"
  finish
fi

# The machine's own Docker engine, started (without touching the machine's bridge or firewall) by the testbed's
# `engine` verb when it is not running; `testbed down --machine-engine` stops it again.
if ! docker info >/dev/null 2>&1 && [[ "$(id -u)" == 0 ]]; then
  "$REPO_ROOT/tests/testbed/testbed" engine >"$WORK/engine.log" 2>&1 || tail -n 20 "$WORK/engine.log"
fi
if ! docker info >/dev/null 2>&1; then
  fail "providers: a docker engine is reachable (docker info; as root, tests/testbed/testbed engine starts one)"
  finish
fi
# A tiny local image (one static binary that sleeps), so no registry is needed.
mkdir -p "$WORK/image"
cat >"$WORK/image/main.go" <<'EOF'
package main

import "time"

func main() { time.Sleep(365 * 24 * time.Hour) }
EOF
check "providers: test image built" bash -c "cd '$WORK/image' && printf 'module sleeper\n\ngo 1.20\n' >go.mod &&
  CGO_ENABLED=0 GOFLAGS=-buildvcs=false go build -o sleeper . && tar -c sleeper | docker import - '$IMAGE_TAG' >/dev/null"

cd "$P2" || exit 1
  check "providers: stack init" run prov-init pulumi stack init providers --non-interactive
  check "providers: preview" run prov-preview pulumi preview --non-interactive
  check "providers: up" run prov-up pulumi up --yes --non-interactive --skip-preview
  pw="$(pulumi stack output --show-secrets passwordValue 2>/dev/null)"
  check "providers: RandomPassword has 20 characters" test "${#pw}" = 20
  check "providers: local command ran" test "$(cat "$MARKER" 2>/dev/null)" = created
  check "providers: container is running" test \
    "$(docker inspect -f '{{.State.Running}}' "$CONTAINER_NAME" 2>/dev/null)" = true
  check "providers: three resources in state" test "$(resource_count providers)" = 3
  check "providers: second up reports no changes" run prov-noop pulumi up --yes --non-interactive --expect-no-changes
  check "providers: destroy" run prov-destroy pulumi destroy --yes --non-interactive --skip-preview
  check "providers: container removed" bash -c "! docker inspect '$CONTAINER_NAME' >/dev/null 2>&1"
  check "providers: command delete ran" test ! -e "$MARKER"
  check "providers: nothing left in state" test "$(resource_count providers)" = 0
  pulumi stack rm --yes --force providers >/dev/null 2>&1
cd "$REPO_ROOT" || exit 1
finish

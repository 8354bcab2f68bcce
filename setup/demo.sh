#!/usr/bin/env bash
# The demo: two simulated GPU hosts on this machine, the vLLM cluster on them, one real chat completion.
#
#   npm run demo              bring everything up (idempotent: run it again and it only checks)
#   npm run demo -- down      remove the demo cluster, then the simulated hosts
#
# Installs what it needs: npm packages (npm ci when node_modules is missing), the simulated hosts
# (tests/testbed, needs root), the Pulumi toolchain (setup/toolchain.sh). With a complete toolchain it runs
# `pulumi up` on the `local` stack (file backend under .state/, passphrase PULUMI_CONFIG_PASSPHRASE, default
# vllm-cluster-local-simulated-only: the local stack's secrets protect nothing real). Without the provider
# plugins it says BLOCKED and deploys the same containers with the DIRECT DRIVER (tests/integration/direct.ts):
# the program's own builders and image provider, run in the graph's order, standing in for the Pulumi engine
# and the plugins. It is not Pulumi.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"

mode="${1:-up}"
case "$mode" in
  up | down) ;;
  *) echo "usage: npm run demo [-- down]" >&2; exit 64 ;;
esac

STACK=local
STATE="$root/.state"
KEY_FILE="$STATE/demo/api-key"
BUILD="$STATE/build"
TB=tests/testbed/testbed
export PULUMI_BACKEND_URL="file://$STATE/pulumi"
export PULUMI_CONFIG_PASSPHRASE="${PULUMI_CONFIG_PASSPHRASE:-vllm-cluster-local-simulated-only}"
export PULUMI_SKIP_UPDATE_CHECK=true

say() { printf '\n==> %s\n' "$*"; }

if [[ $(id -u) != 0 ]]; then
  echo "demo: the simulated hosts need root (network namespaces, one dockerd per host); run it as root" >&2
  exit 1
fi
mkdir -p "$STATE/demo" "$STATE/pulumi"
chmod 700 "$STATE/demo"
if [[ ! -d node_modules ]]; then
  say "npm ci"
  npm ci --no-audit --no-fund
fi

# Complete toolchain => the real Pulumi path. --check builds nothing.
toolchain_complete() { bash setup/toolchain.sh --check >/dev/null 2>&1; }

# The direct driver, compiled from the repo's TypeScript (a few seconds).
direct() {
  npx tsc -p tsconfig.json --outDir "$BUILD" --noEmit false
  node "$BUILD/tests/integration/direct.js" "$@" --stack "$STACK"
}

testbed_up_hosts() { # at least 2; never fewer than are already up (an `up 2` would stop hosts 3+)
  local existing
  existing=$(ip netns list 2>/dev/null | awk '{print $1}' | sed -n 's/^vcl-h\([0-9][0-9]*\)$/\1/p' | sort -n | tail -n 1)
  echo $((${existing:-0} > 2 ? existing : 2))
}

if [[ $mode == down ]]; then
  t0=$SECONDS
  if ip netns list 2>/dev/null | grep -q '^vcl-h1\b'; then
    if toolchain_complete && [[ -d $STATE/pulumi/.pulumi ]]; then
      say "pulumi destroy (stack $STACK)"
      eval "$(bash setup/toolchain.sh --print-env 2>/dev/null)"
      timeout 1200 pulumi destroy --yes --non-interactive --stack "$STACK"
    else
      say "removing the demo containers (direct driver, not Pulumi)"
      direct down
    fi
  fi
  rm -f "$KEY_FILE"
  say "simulated hosts down"
  "$TB" down
  echo "demo: down in $((SECONDS - t0))s"
  exit 0
fi

t0=$SECONDS
hosts=$(testbed_up_hosts)
say "simulated hosts: testbed up $hosts"
timeout 1800 "$TB" up "$hosts"
# The operator's model directory on the hosts (one shared file system on the testbed; the stand-in loads nothing).
model_dir=$(sed -n 's/^ *hostPath: *//p' "stacks/Pulumi.$STACK.yaml" | head -n 1)
mkdir -p "$model_dir"
[[ -f $model_dir/config.json ]] || echo '{"architectures":["StandIn"]}' >"$model_dir/config.json"

say "Pulumi toolchain (log: $STATE/demo/toolchain.log)"
rc=0
bash setup/toolchain.sh >"$STATE/demo/toolchain.log" 2>&1 || rc=$?
case "$rc" in
  0) echo "toolchain complete" ;;
  2) echo "toolchain incomplete (provider plugins missing)" ;;
  *) echo "demo: setup/toolchain.sh failed (exit $rc); see $STATE/demo/toolchain.log" >&2; exit 1 ;;
esac

if toolchain_complete; then
  say "pulumi up (stack $STACK, file backend $STATE/pulumi)"
  eval "$(bash setup/toolchain.sh --print-env 2>/dev/null)"
  pulumi stack select "$STACK" --create --non-interactive
  timeout 3600 pulumi up --yes --non-interactive --stack "$STACK"
  endpoint=$(pulumi stack output endpoint --stack "$STACK")
  (umask 077 && pulumi stack output apiKey --show-secrets --stack "$STACK" >"$KEY_FILE")
  how="pulumi up"
else
  missing=$( (bash setup/toolchain.sh --check 2>&1 || true) | sed -n 's/^toolchain: MISSING: \([^ :]*\) \([^ :]*\):.*/\1 \2/p' | paste -sd, - | sed 's/,/, /g')
  cat <<EOF

################################################################################################################
#  BLOCKED: \`pulumi up\` cannot run on this machine: provider plugin(s) missing: ${missing:-see setup/toolchain.sh --check}
#  They cannot be built here (see setup/toolchain.sh). Deploying the SAME containers with the DIRECT DRIVER
#  instead: the program's own builders and image provider in the graph's order. This is NOT Pulumi.
################################################################################################################
EOF
  say "deploy (direct driver, not Pulumi)"
  out=$(direct up --key-file "$KEY_FILE")
  echo "$out"
  endpoint=$(printf '%s' "$out" | node -e 'let s="";process.stdin.on("data",d=>s+=d).on("end",()=>console.log(JSON.parse(s).endpoint))')
  how="direct driver (not Pulumi)"
fi

model=$(sed -n 's/^ *servedName: *//p' "stacks/Pulumi.$STACK.yaml" | head -n 1)
say "endpoint: $endpoint   (deployed by: $how, $((SECONDS - t0))s)"
say "chat completion (API key from $KEY_FILE, sent in a header file; not printed)"
hdr=$(mktemp)
trap 'rm -f "$hdr"' EXIT
chmod 600 "$hdr"
printf 'Authorization: Bearer %s\n' "$(cat "$KEY_FILE")" >"$hdr"
body=$(printf '{"model":"%s","messages":[{"role":"user","content":"Which nodes answered?"}],"max_tokens":32}' "$model")
curl -sS --fail-with-body --max-time 60 -H @"$hdr" -H 'Content-Type: application/json' -d "$body" "$endpoint/chat/completions" |
  python3 -m json.tool
cat <<EOF

Try it:   curl -H "Authorization: Bearer \$(cat $KEY_FILE)" $endpoint/models
Tear down: npm run demo -- down   (removes the demo containers, then the simulated hosts)
EOF

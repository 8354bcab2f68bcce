#!/usr/bin/env bash
# The demo: two simulated GPU hosts on this machine, `pulumi up` of the `local` stack on them, and one real chat
# completion through the stack's `endpoint` and `apiKey` outputs.
#
#   npm run demo              bring everything up; run it again and `pulumi up` reports no changes
#   npm run demo -- down      `pulumi destroy`, then remove the simulated hosts and the Docker engine they used
#
# Installs what it needs: npm packages, the simulated hosts (tests/testbed, needs root: Debian's Docker engine
# and OpenSSH server, the test image with vLLM's CPU build, the tiny model), the Pulumi toolchain
# (setup/toolchain.sh, which says where it finds the Pulumi source archives). Pulumi state lives
# in .state/pulumi (a file backend); the local stack's secrets passphrase is vllm-cluster-local-simulated-only
# unless PULUMI_CONFIG_PASSPHRASE is set: its secrets protect nothing real.
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
TB=tests/testbed/testbed
TB_STATE="${VCL_TESTBED_DIR:-/var/lib/vllm-cluster-testbed}"
MARKER="$TB_STATE/demo"
ENV_FILE="$STATE/demo.env"
export PULUMI_BACKEND_URL="file://$STATE/pulumi"
export PULUMI_CONFIG_PASSPHRASE="${PULUMI_CONFIG_PASSPHRASE:-vllm-cluster-local-simulated-only}"

say() { printf '\n==> %s\n' "$*"; }

# This run's time, with what it found cached, goes to the results directory (tests/lib/suite.js): the docs' figures
# come from accepted records (npm run docs -- --accept DIR), never pasted. Never fails the demo.
tc_cache="not used" image_cache="not used" started=$(date +%s)
record_run() { # kind seconds
  node tests/lib/suite.js demo "$1" "$2" "$tc_cache" "$image_cache" >/dev/null 2>&1 || true
}

if [[ $(id -u) != 0 ]]; then
  echo "demo: the simulated hosts need root (network namespaces, one dockerd per host); run it as root" >&2
  exit 1
fi
# Before anything is downloaded: can this CPU run the test image (x86-64 with AVX2, FMA, F16C)?
if [[ $mode == up ]]; then
  if ! cpu=$("$TB" cpu); then
    echo "demo: $cpu" >&2
    exit 1
  fi
  echo "demo: $cpu"
fi
mkdir -p "$STATE/pulumi"
chmod 700 "$STATE"

toolchain_env() { # the toolchain on PATH (building it once, with progress), offline settings
  say "Pulumi toolchain (first run builds it from source: about 20-25 minutes on 2 cores; later runs: seconds)"
  eval "$(bash setup/toolchain.sh --print-env)"
  export PULUMI_BACKEND_URL # toolchain env keeps an already set backend
}

if [[ $mode == down ]]; then
  t0=$SECONDS
  if [[ -d "$STATE/pulumi/.pulumi/stacks" ]] && ls "$STATE"/pulumi/.pulumi/stacks/*/"$STACK".json* >/dev/null 2>&1; then
    toolchain_env
    if ip netns list 2>/dev/null | grep -q '^vcl-h1\b'; then
      say "pulumi destroy (stack $STACK)"
      # An interrupted earlier run can leave pending operations; refresh clears them, then destroy.
      if ! timeout --foreground 1200 pulumi destroy --yes --non-interactive --skip-preview --stack "$STACK"; then
        echo "demo: destroy failed; refreshing (clearing pending operations) and trying once more" >&2
        timeout --foreground 600 pulumi refresh --yes --non-interactive --skip-preview --clear-pending-creates --stack "$STACK" || true
        timeout --foreground 1200 pulumi destroy --yes --non-interactive --skip-preview --stack "$STACK" ||
          echo "demo: destroy failed again; the simulated hosts are removed below anyway, with everything on them" >&2
      fi
    fi
    # The hosts (and everything deployed on them) go away next: the stack's state must not outlive them.
    # --preserve-config: the stack file is part of the repository
    pulumi stack rm --yes --force --preserve-config --non-interactive --stack "$STACK" >/dev/null 2>&1 || true
  fi
  say "simulated hosts and the machine's Docker engine down"
  "$TB" down --machine-engine
  rm -f "$MARKER" "$ENV_FILE"
  record_run down $((SECONDS - t0))
  echo "demo: down in $((SECONDS - t0))s; nothing of the demo is running"
  exit 0
fi

running="$TB_STATE/tests-running"
if [[ -s "$running" ]] && kill -0 "$(cat "$running")" 2>/dev/null; then
  echo "demo: npm test (pid $(cat "$running")) is using the simulated hosts; run the demo when it has finished" >&2
  exit 1
fi

t0=$SECONDS
if bash setup/toolchain.sh --check >/dev/null 2>&1; then tc_cache=cached; else tc_cache=cold; fi
if [[ ! -d node_modules || package-lock.json -nt node_modules/.package-lock.json ]]; then
  say "npm ci"
  npm ci --no-audit --no-fund
fi

say "simulated hosts: testbed up 2 (first run installs Docker and sshd, builds the test image with vLLM's CPU build and the tiny model: about 10-15 minutes)"
timeout --foreground 3600 "$TB" up 2
mkdir -p "$TB_STATE"
echo "$root" >"$MARKER"
# a test image built by this run is a tarball in the testbed's cache newer than the run's start
image_cache=cached
if [[ -n $(find "${XDG_CACHE_HOME:-$HOME/.cache}/vllm-cluster/testbed-image" -maxdepth 1 -name '*.tar' \
  -newermt "@$started" 2>/dev/null) ]]; then image_cache=cold; fi

toolchain_env

say "pulumi up (stack $STACK, state in .state/pulumi)"
pulumi stack select "$STACK" --create --non-interactive
# from nothing deployed (the state holds at most the stack itself), or a run again over a deployed cluster
deployed=$(pulumi stack export --stack "$STACK" 2>/dev/null |
  node -e 'let s="";process.stdin.on("data",(d)=>(s+=d)).on("end",()=>console.log((JSON.parse(s).deployment?.resources??[]).length))' ||
  echo 0)
timeout --foreground 3600 pulumi up --yes --non-interactive --skip-preview --stack "$STACK"

endpoint=$(pulumi stack output endpoint --stack "$STACK")
model=$(pulumi stack output servedModelName --stack "$STACK")
say "chat completion through the stack outputs: endpoint $endpoint, model $model, apiKey (secret, not printed)"
hdr=$(mktemp)
trap 'rm -f "$hdr"' EXIT
chmod 600 "$hdr"
printf 'Authorization: Bearer %s\n' "$(pulumi stack output apiKey --show-secrets --stack "$STACK")" >"$hdr"
body=$(printf '{"model":"%s","messages":[{"role":"user","content":"Say hello to the cluster."}],"max_tokens":24,"temperature":0}' "$model")
# HTTPS (serve.tls): trust exactly the stack's own certificate, which also names the head's address
tls=()
if cert=$(pulumi config get --path serve.tls.certFile --stack "$STACK" 2>/dev/null) && [[ -n $cert ]]; then tls=(--cacert "$cert"); fi
curl -sS --fail-with-body --max-time 120 "${tls[@]}" -H @"$hdr" -H 'Content-Type: application/json' -d "$body" "$endpoint/chat/completions" |
  python3 -m json.tool

cat >"$ENV_FILE" <<EOF
# Environment for pulumi commands against the demo's local stack (written by npm run demo).
export PATH="$(dirname "$(command -v pulumi)"):\$PATH"
export PULUMI_BACKEND_URL="$PULUMI_BACKEND_URL"
export PULUMI_CONFIG_PASSPHRASE="$PULUMI_CONFIG_PASSPHRASE"
export PULUMI_SKIP_UPDATE_CHECK=true PULUMI_DISABLE_AUTOMATIC_PLUGIN_ACQUISITION=true PULUMI_IGNORE_AMBIENT_PLUGINS=true
EOF
chmod 600 "$ENV_FILE"
if ((deployed > 1)); then record_run "up again" $((SECONDS - t0)); else record_run up $((SECONDS - t0)); fi
cat <<EOF

demo: up in $((SECONDS - t0))s. The model's answer above is generated by vLLM's CPU build from a tiny random model,
so it is not meant to make sense; the path to it is the real one.

Use the stack from this shell (the tiny model's name is $model):
  source .state/demo.env
  pulumi stack output                      # endpoint, servedModelName, nodes, ...
  pulumi preview --diff                    # nothing to change
  pulumi refresh                           # compare the state with the hosts
  npm run status -- --stack $STACK          # each host's containers, memory, Ray, what vLLM serves
  npm run bench:serve -- --stack $STACK --protocol smoke   # vLLM's serving benchmark (20 s here)
  pulumi stack output monitoring           # Prometheus on spark-1: the ssh tunnel to open it in a browser
Tear down:  npm run demo -- down
EOF

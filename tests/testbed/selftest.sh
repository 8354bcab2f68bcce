#!/usr/bin/env bash
# Self-test of the simulated Spark hosts: brings up 2 hosts from nothing, proves each is a separate machine as far
# as SSH, Docker and shared memory can tell, runs the test image's real vLLM (CPU build) on the tiny model with the
# program's key-file entrypoint, shows why readiness needs a real request, then scales to 4 hosts, tears everything
# down and proves nothing is left. Needs root; no npm. (Ray and TP 2 across the hosts, deployed by Pulumi, are
# tests/integration.)
#
# Usage: tests/testbed/selftest.sh          (VCL_SELFTEST_KEEP=1 leaves 2 hosts up at the end, after checking down;
#                                           VCL_SELFTEST_KEEP=hosts leaves the 4 hosts up and does not run down:
#                                           npm test goes on with them, and its teardown stage runs `testbed down`,
#                                           which fails on anything left behind, the same scan as below and more)
set -uo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
readonly HERE
readonly TB="$HERE/testbed"
readonly STATE="${VCL_TESTBED_DIR:-/var/lib/vllm-cluster-testbed}"
readonly IMAGE="vllm-cluster-testbed:latest"
readonly KEEP="${VCL_SELFTEST_KEEP:-0}"
readonly WORK="$STATE/selftest"
# shellcheck source=../lib/results.sh
source "$HERE/../lib/results.sh"
TIMINGS=()
T_START=$SECONDS

say() { printf '[selftest %s] %s\n' "$(date +%H:%M:%S)" "$*"; }
timed() { # LABEL CMD...: run CMD, record its duration
  local label="$1" t0=$SECONDS rc=0
  shift
  "$@" || rc=$?
  TIMINGS+=("$label: $((SECONDS - t0))s")
  return $rc
}
mgmt_ip() { echo "10.231.0.$((10 + $1))"; }
fab_ip() { echo "10.232.0.$((10 + $1))"; }
SSH_OPTS=(-i "$STATE/ssh/id_ed25519" -o IdentitiesOnly=yes -o "UserKnownHostsFile=$STATE/ssh/known_hosts"
  -o StrictHostKeyChecking=yes -o BatchMode=yes -o ConnectTimeout=10 -o LogLevel=ERROR)
on() { # I CMD...: run CMD on host I over SSH (each argument quoted for the remote shell), bounded
  local i="$1"
  shift
  timeout --foreground 300 ssh "${SSH_OPTS[@]}" "root@$(mgmt_ip "$i")" "$(printf '%q ' "$@")"
}
poll() { # SECONDS WHAT CMD...: bounded wait; says what it waited for on timeout
  local limit="$1" what="$2" deadline=$((SECONDS + $1))
  shift 2
  until "$@" >/dev/null 2>&1; do
    if ((SECONDS >= deadline)); then echo "timed out after ${limit}s waiting for $what" >&2; return 1; fi
    sleep 1
  done
}
code() { curl -s -o /dev/null -w '%{http_code}' --max-time 60 "$@"; }
healthy() { [[ $(code "$1/health") == 200 ]]; } # BASE-URL

mem_report() { # LABEL: memory of each host (all processes in its network namespace)
  local i p rss tot
  for i in 1 2; do
    tot=0
    for p in $(ip netns pids "vcl-h$i"); do
      rss="$(awk '/^VmRSS/{print $2}' "/proc/$p/status" 2>/dev/null || true)"
      tot=$((tot + ${rss:-0}))
    done
    TIMINGS+=("memory spark-$i $1: $((tot / 1024)) MiB RSS over $(ip netns pids "vcl-h$i" | wc -l) processes")
  done
}

cleanup() {
  if [[ $KEEP != 1 && $KEEP != hosts && -d $STATE/hosts ]]; then
    say "cleanup: testbed down"
    "$TB" down >/dev/null 2>&1 || say "cleanup: testbed down failed (run '$TB down' by hand)"
  fi
  rm -rf "$WORK"
  say "timings:"
  printf '  %s\n' "${TIMINGS[@]}" "total: $((SECONDS - T_START))s"
}
trap cleanup EXIT

[[ $(id -u) == 0 ]] || { echo "selftest: must run as root" >&2; exit 1; }

# ---------------------------------------------------------------------------------------------------- up
# From nothing: hosts left by an earlier run (their engines keep images on disk) would make "spark-1 only" untrue.
say "testbed down, then up 2 (from nothing)"
"$TB" down >/dev/null 2>&1 || { fail "testbed down before the self-test"; finish; }
timed "up 2 (first)" "$TB" up 2 || { fail "testbed up 2"; finish; }
pass "testbed up 2"
dockerd_pids() { cat /run/vcl-h*/docker.pid 2>/dev/null | sort | tr '\n' ' '; }
before="$(dockerd_pids)"
check "up 2 again is a no-op that keeps the same engines" \
  bash -c "'$TB' up 2 >/dev/null 2>&1 && test '$before' = \"\$(cat /run/vcl-h*/docker.pid | sort | tr '\n' ' ')\""
check "testbed status reports healthy hosts" "$TB" status
mem_report "idle (dockerd, containerd, sshd)"

# --------------------------------------------------------------------------------------- separate hosts
say "separate hosts: SSH with verified host keys, one Docker engine, one /dev/shm each"
for i in 1 2; do
  check "spark-$i: ssh with StrictHostKeyChecking=yes, hostname is spark-$i" test "$(on "$i" hostname)" = "spark-$i"
done
empty_kh="$(mktemp)"
check "an unknown host key is refused" \
  bash -c "! ssh ${SSH_OPTS[*]/"$STATE/ssh/known_hosts"/$empty_kh} root@$(mgmt_ip 1) true"
rm -f "$empty_kh"
root1="$(on 1 docker info -f '{{.DockerRootDir}}')" root2="$(on 2 docker info -f '{{.DockerRootDir}}')"
check "each host's docker answers from its own engine" \
  test "$root1 $root2" = "$STATE/hosts/spark-1/docker $STATE/hosts/spark-2/docker"
check "ssh:// transport: docker system dial-stdio reaches spark-2's engine" bash -c "printf 'GET /_ping HTTP/1.0\r\n\r\n' |
  timeout --foreground 20 ssh ${SSH_OPTS[*]} root@$(mgmt_ip 2) docker system dial-stdio | grep -q '^HTTP/1.0 200'"
check "a host-network container sees only its host's addresses" bash -c "
  out=\$(ssh ${SSH_OPTS[*]} root@$(mgmt_ip 1) docker run --rm --network host $IMAGE ip -4 -o addr show)
  grep -q $(fab_ip 1)/24 <<<\"\$out\" && ! grep -q $(fab_ip 2) <<<\"\$out\""
# The engine's mount namespace is the host's: its /dev/shm is what host-IPC containers share.
host_shm() { nsenter -t "$(cat "/run/vcl-h$1/docker.pid")" -m ls /dev/shm; }
on 1 docker run --rm --ipc host "$IMAGE" sh -c 'echo spark-1 > /dev/shm/vcl-selftest' >/dev/null
check "host IPC: a host-IPC container's /dev/shm file is on its host, not on the other" \
  bash -c "[ \"\$(nsenter -t \$(cat /run/vcl-h1/docker.pid) -m cat /dev/shm/vcl-selftest)\" = spark-1 ] &&
    ! nsenter -t \$(cat /run/vcl-h2/docker.pid) -m test -e /dev/shm/vcl-selftest && ! test -e /dev/shm/vcl-selftest"
on 1 docker run --rm --ipc host "$IMAGE" rm -f /dev/shm/vcl-selftest >/dev/null
check "spark-2's /dev/shm is its own (empty)" test -z "$(host_shm 2)"
OWN="$STATE/own"
on 1 sh -c "echo spark-1 > $OWN/vcl-selftest" >/dev/null
check "each host's own directory: a file spark-1 writes there over ssh is in its containers, not on spark-2" \
  bash -c "[ \"\$(ssh ${SSH_OPTS[*]} root@$(mgmt_ip 1) docker run --rm -v $OWN:/own:ro $IMAGE cat /own/vcl-selftest)\" = spark-1 ] &&
    ! ssh ${SSH_OPTS[*]} root@$(mgmt_ip 2) test -e $OWN/vcl-selftest && ! test -e $OWN/vcl-selftest"
on 1 rm -f "$OWN/vcl-selftest" >/dev/null

# ------------------------------------------------------------------------------------------ image, model
say "image on spark-1 only; vLLM's CPU build and Ray; the tiny model"
check "spark-1 has $IMAGE, spark-2 does not (moving it is the program's job)" \
  bash -c "ssh ${SSH_OPTS[*]} root@$(mgmt_ip 1) docker image inspect $IMAGE >/dev/null &&
    ! ssh ${SSH_OPTS[*]} root@$(mgmt_ip 2) docker image inspect $IMAGE >/dev/null 2>&1"
check "the image has no entrypoint (the program always sets its own)" \
  test "$(on 1 docker image inspect -f '{{json .Config.Entrypoint}}' "$IMAGE")" = null
check "the image carries vLLM 0.32.0+cpu" bash -c "ssh ${SSH_OPTS[*]} root@$(mgmt_ip 1) docker run --rm $IMAGE vllm --version |
  grep -qx '0.32.0+cpu'"
check "the image carries Ray 2.53.0" bash -c "ssh ${SSH_OPTS[*]} root@$(mgmt_ip 1) docker run --rm $IMAGE ray --version | grep -q 2.53.0"
check "torch in the image imports without CUDA (the CUDA libraries are stubs)" \
  on 1 docker run --rm "$IMAGE" python3 -c 'import torch; assert not torch.cuda.is_available()'
check "the tiny model is a Qwen2 with head_dim 32 in safetensors" python3 - "$STATE/models/tiny-qwen2" <<'PY'
import json, os, sys
d = sys.argv[1]
c = json.load(open(os.path.join(d, "config.json")))
assert c["architectures"] == ["Qwen2ForCausalLM"] and c["head_dim"] == 32 and c["num_hidden_layers"] == 2, c
assert os.path.getsize(os.path.join(d, "model.safetensors")) > 100_000
assert "<|im_start|>" in open(os.path.join(d, "chat_template.jinja")).read()
PY

# ------------------------------------------------------------------------------------------------ vLLM
say "real vLLM (CPU build) on spark-1: the program's key-file entrypoint, TP 1, the tiny model"
mkdir -p "$WORK"
head -c 36 /dev/urandom | base64 | tr -d '\n/+=' >"$WORK/api-key"
chmod 600 "$WORK/api-key"
KEY="$(cat "$WORK/api-key")"
# The fail-closed part of the entrypoint the program uses (infra/scripts/serve_entrypoint.sh): the key from the mounted file, never
# argv or env, and no server at all without it.
ENTRY='f=/run/vllm-cluster/api-key; k=; if [ -f "$f" ] && [ -r "$f" ]; then k="$(cat "$f")"; fi; if [ -z "$k" ]; then echo "vllm-serve: no API key in $f (missing, not a file, unreadable or empty); refusing to serve without one" >&2; exit 78; fi; VLLM_API_KEY="$k" exec "$@"'
serve() { # NAME PORT MODEL [KEYFILE]: a detached vllm serve container on spark-1
  local name="$1" port="$2" model="$3" key="${4:-$WORK/api-key}"
  on 1 docker run -d --name "$name" --network host --ipc host -e VLLM_CPU_KVCACHE_SPACE=1 -e "VLLM_HOST_IP=$(fab_ip 1)" \
    -v "$STATE/models:/models:ro" --mount "type=bind,source=$key,target=/run/vllm-cluster/api-key,readonly" \
    --entrypoint /bin/sh "$IMAGE" -c "$ENTRY" vllm-serve \
    vllm serve "/models/$model" --served-model-name tiny --host 0.0.0.0 --port "$port" --max-model-len 512 \
    --dtype float32 --enforce-eager >/dev/null
}
URL="http://$(mgmt_ip 1):8101"
chat() { printf '{"model":"tiny","messages":[{"role":"user","content":"%s"}],"max_tokens":8,"temperature":0}' "$1"; }
t0=$SECONDS
serve vcl-selftest-serve 8101 tiny-qwen2
if poll 300 "$URL/health to answer 200" healthy "$URL"; then
  TIMINGS+=("vLLM TP 1 start to /health 200: $((SECONDS - t0))s")
  pass "/health answers 200"
else
  fail "/health answers 200" "$(on 1 docker logs --tail 30 vcl-selftest-serve 2>&1)"
fi
check "a chat completion with the key: 200 with generated tokens" bash -c "
  curl -sS --max-time 120 -H 'Authorization: Bearer $KEY' -H 'Content-Type: application/json' -d '$(chat hello)' \
    $URL/v1/chat/completions | python3 -c 'import json,sys; r=json.load(sys.stdin); assert r[\"usage\"][\"completion_tokens\"] > 0, r'"
TIMINGS+=("vLLM TP 1 start to first completion: $((SECONDS - t0))s")
check "no key: 401" test "$(code -H 'Content-Type: application/json' -d "$(chat hello)" "$URL/v1/chat/completions")" = 401
check "a wrong key: 401" test "$(code -H 'Authorization: Bearer nope' "$URL/v1/models")" = 401
check "/metrics is vLLM's own, counting the request" bash -c "curl -sS --max-time 10 $URL/metrics |
  grep -Eq '^vllm:request_success_total\\{.*model_name=\"tiny\".*\\} [1-9]'"
mem_report "vLLM TP 1 serving on spark-1"
# vLLM's own choice of kernel library on this CPU, read back from the server's processes (never imported by name)
kernels="$(on 1 docker exec vcl-selftest-serve vcl-kernels --ranks 2>&1)"
printf '%s\n' "$kernels" | sed 's/^/  kernel library: /'
want="$("$TB" cpu | sed -n 's/.*vLLM will load its \(_C[A-Z0-9_]*\) kernels.*/\1/p')"
check "vLLM loaded the kernel library this CPU's flags call for ($want), in every process that loaded one" \
  bash -c "[ -n '$want' ] && ! printf '%s\n' \"\$1\" | grep -v ': $want\$' | grep -q . && printf '%s\n' \"\$1\" | grep -q ': $want\$'" _ "$kernels"
on 1 docker rm -f vcl-selftest-serve >/dev/null

say "the AVX2 path whatever this CPU: VCL_TESTBED_CPU_ISA=avx2, tensor parallel 2 in one container (two ranks)"
t0=$SECONDS
on 1 docker run -d --name vcl-selftest-avx2 --network host --ipc host -e VLLM_CPU_KVCACHE_SPACE=1 \
  -e "VLLM_HOST_IP=$(fab_ip 1)" -e VCL_TESTBED_CPU_ISA=avx2 -e 'VLLM_CPU_OMP_THREADS_BIND=0|1' \
  -v "$STATE/models:/models:ro" --mount "type=bind,source=$WORK/api-key,target=/run/vllm-cluster/api-key,readonly" \
  --entrypoint /bin/sh "$IMAGE" -c "$ENTRY" vllm-serve \
  vllm serve /models/tiny-qwen2 --served-model-name tiny --host 0.0.0.0 --port 8104 --max-model-len 512 \
  --dtype float32 --enforce-eager --tensor-parallel-size 2 --distributed-executor-backend mp >/dev/null
URLA="http://$(mgmt_ip 1):8104"
if poll 420 "$URLA/health (TP 2 on the AVX2 path) to answer 200" healthy "$URLA"; then
  answer="$(curl -sS --max-time 120 -H "Authorization: Bearer $KEY" -H 'Content-Type: application/json' -d "$(chat hello)" \
    "$URLA/v1/chat/completions" | python3 -c 'import json,sys; r=json.load(sys.stdin); print(r["usage"]["completion_tokens"], json.dumps(r["choices"][0]["message"]["content"]))' 2>&1)"
  TIMINGS+=("vLLM TP 2 on the AVX2 path, start to first completion: $((SECONDS - t0))s")
  say "AVX2 path: completion (tokens, text): $answer"
  check "AVX2 path: a real chat completion with generated tokens" bash -c "[ \"\${1%% *}\" -gt 0 ] 2>/dev/null" _ "$answer"
  kernels="$(on 1 docker exec vcl-selftest-avx2 vcl-kernels --ranks 2>&1)"
  printf '%s\n' "$kernels" | sed 's/^/  kernel library (AVX2 path): /'
  check "AVX2 path: both tensor-parallel ranks loaded _C_AVX2, and no process loaded another kernel library" \
    bash -c "[ \"\$(printf '%s\n' \"\$1\" | grep -c 'Worker_TP[01]\].*: _C_AVX2\$')\" = 2 ] &&
      ! printf '%s\n' \"\$1\" | grep -v ': _C_AVX2\$' | grep -q ." _ "$kernels"
else
  fail "AVX2 path: /health answers 200" "$(on 1 docker logs --tail 30 vcl-selftest-avx2 2>&1)"
fi
on 1 docker rm -f vcl-selftest-avx2 >/dev/null

say "fail closed: no key file means no server"
mkdir -p "$WORK/empty-dir"
serve vcl-selftest-nokey 8102 tiny-qwen2 "$WORK/empty-dir"
nokey_exited() { [[ $(on 1 docker inspect -f '{{.State.Status}} {{.State.ExitCode}}' vcl-selftest-nokey) == "exited 78" ]]; }
check "with a directory where the key file should be, the server exits 78 without starting" \
  poll 60 "the keyless server to exit with 78" nokey_exited
check "... and says why" bash -c "ssh ${SSH_OPTS[*]} root@$(mgmt_ip 1) docker logs vcl-selftest-nokey 2>&1 | grep -q 'refusing to serve without one'"
on 1 docker rm -f vcl-selftest-nokey >/dev/null

say "readiness needs a real request: a model the CPU kernels cannot run (head_dim 16)"
serve vcl-selftest-hd16 8103 tiny-qwen2-hd16
URL16="http://$(mgmt_ip 1):8103"
check "/health answers 200 for the head_dim 16 model" poll 300 "/health of the head_dim 16 model" healthy "$URL16"
check "... but its first chat completion fails" bash -c "[ \"\$(curl -s -o /dev/null -w '%{http_code}' --max-time 120 \
  -H 'Authorization: Bearer $KEY' -H 'Content-Type: application/json' -d '$(chat hello)' $URL16/v1/chat/completions)\" != 200 ]"
on 1 docker rm -f vcl-selftest-hd16 >/dev/null

# ---------------------------------------------------------------------------------------- scale, down
say "scale to 4 hosts, then down"
before="$(cat /run/vcl-h1/docker.pid /run/vcl-h2/docker.pid 2>/dev/null | tr '\n' ' ')"
check "up 4 after up 2 keeps spark-1/2's engines" bash -c "'$TB' up 4 >/dev/null 2>&1 &&
  test '$before' = \"\$(cat /run/vcl-h1/docker.pid /run/vcl-h2/docker.pid | tr '\n' ' ')\""
check "spark-4 answers over ssh" test "$(on 4 hostname)" = spark-4
if [[ $KEEP == hosts ]]; then
  say "down: left to the caller (VCL_SELFTEST_KEEP=hosts): spark-1..4 stay up, the image on spark-1 only"
else
  check "testbed down removes everything (its own leftover scan)" "$TB" down
  check "no namespace, link, mount or state of the testbed is left" bash -c "
    ! ip netns list | grep -q '^vcl-h' && ! ip -o link show | grep -q ' vcl-' &&
    ! findmnt -rn -o TARGET | grep -q -e '^$STATE/hosts' -e '^/run/vcl-h' && ! compgen -G '/run/vcl-h*' >/dev/null &&
    [ ! -e '$STATE/hosts' ] && [ ! -e '$STATE/hosts.json' ] && [ ! -e '$STATE/models' ]"
  if [[ $KEEP == 1 ]]; then "$TB" up 2 >/dev/null 2>&1 || fail "up 2 for VCL_SELFTEST_KEEP"; fi
fi
finish

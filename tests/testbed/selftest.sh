#!/usr/bin/env bash
# Self-test of the simulated Spark hosts: brings up 2 hosts, proves each is a separate machine as far as SSH,
# Docker and Ray can tell, runs a real Ray cluster across them with the vLLM stand-in on top, reproduces the
# wrong-IP failure, then tears everything down and proves nothing is left. Needs root; no npm.
#
# Usage: tests/testbed/selftest.sh          (VCL_SELFTEST_KEEP=1 leaves the testbed up at the end)
# Last line: "N passed, M failed".
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
readonly HERE
readonly TB="$HERE/testbed"
readonly STATE="${VCL_TESTBED_DIR:-/var/lib/vllm-cluster-testbed}"
readonly IMAGE="vllm-cluster-testbed:latest"
readonly KEEP="${VCL_SELFTEST_KEEP:-0}"
readonly SERVE_PORT=8001
readonly WORK="$STATE/selftest"

PASSED=0
FAILED=0
FAILURES=()
TIMINGS=()
T_START=$SECONDS

say() { printf '[selftest %s] %s\n' "$(date +%H:%M:%S)" "$*"; }
pass() { PASSED=$((PASSED + 1)); printf '  ok   %s\n' "$1"; }
fail() { FAILED=$((FAILED + 1)); FAILURES+=("$1"); printf '  FAIL %s%s\n' "$1" "${2:+: $2}"; }
# expect NAME CMD...: one assertion.
expect() {
  local name="$1"; shift
  local out
  if out="$("$@" 2>&1)"; then pass "$name"; else fail "$name" "$(tail -n 5 <<<"$out")"; fi
}
timed() { # timed LABEL CMD...: run CMD, record its duration
  local label="$1" t0=$SECONDS rc=0; shift
  "$@" || rc=$?
  TIMINGS+=("$label: $((SECONDS - t0))s")
  return $rc
}

mgmt_ip() { echo "10.231.0.$((10 + $1))"; }
fab_ip() { echo "10.232.0.$((10 + $1))"; }
ssh_base() {
  echo -i "$STATE/ssh/id_ed25519" -o IdentitiesOnly=yes -o "UserKnownHostsFile=$STATE/ssh/known_hosts" \
    -o StrictHostKeyChecking=yes -o BatchMode=yes -o ConnectTimeout=10 -o LogLevel=ERROR
}
# on I CMD...: run CMD on host I over SSH (each argument quoted for the remote shell).
on() {
  local i="$1"; shift
  # shellcheck disable=SC2046 # ssh_base is a plain word list without spaces inside words
  ssh $(ssh_base) "root@$(mgmt_ip "$i")" "$(printf '%q ' "$@")"
}
# poll SECONDS WHAT CMD...: bounded wait; prints what it waited for on timeout.
poll() {
  local limit="$1" what="$2" deadline=$((SECONDS + $1)); shift 2
  until "$@" >/dev/null 2>&1; do
    if ((SECONDS >= deadline)); then echo "timed out after ${limit}s waiting for $what" >&2; return 1; fi
    sleep 1
  done
}
http() { curl -sS -m 10 "$@"; }

# mem_report LABEL: memory of each host (all processes in its namespace, and its containers' cgroup)
mem_report() {
  local i ns p rss tot cg
  for i in 1 2; do
    ns="vcl-h$i" tot=0
    for p in $(ip netns pids "$ns"); do
      rss="$(awk '/^VmRSS/{print $2}' "/proc/$p/status" 2>/dev/null || true)"
      tot=$((tot + ${rss:-0}))
    done
    cg="$(cat /sys/fs/cgroup/memory/vcl-h$i/memory.usage_in_bytes 2>/dev/null || echo 0)"
    TIMINGS+=("memory spark-$i $1: RSS sum $((tot / 1024)) MiB over $(ip netns pids "$ns" | wc -l) processes; containers' cgroup $((cg / 1048576)) MiB")
  done
}

summary() {
  local rc=$?
  trap - EXIT
  if [[ $KEEP != 1 && -d $STATE/hosts ]]; then
    say "cleanup after an early exit: testbed down"
    "$TB" down >/dev/null 2>&1 || say "cleanup: testbed down failed (run '$TB down' by hand)"
  fi
  [[ $KEEP == 1 ]] || rm -rf "$WORK"
  echo
  say "timings:"
  printf '  %s\n' "${TIMINGS[@]}" "total: $((SECONDS - T_START))s"
  ((${#FAILURES[@]} == 0)) || { say "failures:"; printf '  - %s\n' "${FAILURES[@]}"; }
  ((rc == 0)) || FAILED=$((FAILED + 1))
  echo "$PASSED passed, $FAILED failed"
  ((FAILED == 0))
}
trap summary EXIT

[[ $(id -u) == 0 ]] || { echo "selftest: must run as root" >&2; exit 1; }

# ---------------------------------------------------------------------------------------------- up
# A self-test of bringing hosts up from nothing: hosts left by an earlier run (their engines keep images on disk
# even when their processes are gone) would make "spark-1 only" untrue.
say "testbed down (start from nothing)"
"$TB" down >/dev/null 2>&1 || { fail "testbed down before the self-test"; exit 1; }
say "testbed up 2"
timed "up 2 (first)" "$TB" up 2 || { fail "testbed up 2"; exit 1; }
pass "testbed up 2"
dockerd_pids() { cat /run/vcl-h*/docker.pid 2>/dev/null | sort | tr '\n' ' '; }
before="$(dockerd_pids)"
timed "up 2 (again, idempotent)" "$TB" up 2 >/dev/null 2>&1 && pass "up 2 twice is a no-op" || fail "up 2 twice"
expect "second up kept the same engines" test "$before" == "$(dockerd_pids)"
expect "testbed status reports healthy hosts" "$TB" status
mem_report "idle (dockerd+containerd+sshd)"
expect "hosts.json describes 2 hosts" python3 - "$STATE/hosts.json" <<'PY'
import json, sys
h = json.load(open(sys.argv[1]))["hosts"]
assert [x["name"] for x in h] == ["spark-1", "spark-2"], h
for i, x in enumerate(h, 1):
    assert x["mgmtIp"] == f"10.231.0.{10+i}" and x["fabricIp"] == f"10.232.0.{10+i}", x
    assert x["fabricInterface"] == "fabric0" and x["sshPort"] == 22, x
    assert x["dockerSocket"] == f"unix:///run/vcl-h{i}/docker.sock", x
PY

# --------------------------------------------------------------------------------------- ssh/docker
say "SSH with verified host keys, one Docker engine per host"
for i in 1 2; do
  expect "spark-$i: ssh with StrictHostKeyChecking=yes, hostname is spark-$i" \
    test "$(on "$i" hostname)" == "spark-$i"
done
empty_kh="$(mktemp)"
# shellcheck disable=SC2046
expect "an unknown host key is refused" bash -c "! ssh $(ssh_base | sed "s|$STATE/ssh/known_hosts|$empty_kh|") \
root@$(mgmt_ip 1) true"
rm -f "$empty_kh"
expect "spark-1 sshd log counts accepted connections" grep -q "Accepted publickey for root" \
  "$STATE/hosts/spark-1/sshd.log"
id1="$(on 1 docker info -f '{{.ID}} {{.DockerRootDir}}' || true)"
id2="$(on 2 docker info -f '{{.ID}} {{.DockerRootDir}}' || true)"
expect "spark-1's docker info comes from its own engine" test "${id1#* }" == "$STATE/hosts/spark-1/docker"
expect "spark-2's docker info comes from its own engine" test "${id2#* }" == "$STATE/hosts/spark-2/docker"
expect "engine IDs differ" test -n "${id1%% *}" -a "${id1%% *}" != "${id2%% *}"
# The docker provider's ssh:// transport runs `docker system dial-stdio` remotely; it must reach the host's engine.
expect "ssh:// transport: dial-stdio reaches spark-2's engine" bash -c "printf 'GET /_ping HTTP/1.0\r\n\r\n' |
  timeout 20 ssh $(ssh_base) root@$(mgmt_ip 2) docker system dial-stdio | grep -q '^HTTP/1.0 200'"
expect "a host container sees only that host's addresses" bash -c "
  out=\$(ssh $(ssh_base) root@$(mgmt_ip 1) docker run --rm --network host $IMAGE ip -4 -o addr show)
  grep -q 10.232.0.11/24 <<<\"\$out\" && ! grep -q 10.232.0.12 <<<\"\$out\""

# ------------------------------------------------------------------------------------------- image
say "image on spark-1 only, then moved to spark-2 over ssh"
expect "spark-1 has $IMAGE" on 1 docker image inspect "$IMAGE"
expect "spark-2 does not have $IMAGE yet" bash -c "! ssh $(ssh_base) root@$(mgmt_ip 2) docker image inspect $IMAGE"
t0=$SECONDS
# shellcheck disable=SC2046
if ssh $(ssh_base) "root@$(mgmt_ip 1)" docker save "$IMAGE" | ssh $(ssh_base) "root@$(mgmt_ip 2)" docker load >/dev/null
then pass "ssh spark-1 docker save | ssh spark-2 docker load"; else fail "image copy over ssh"; fi
TIMINGS+=("image copy spark-1 -> spark-2: $((SECONDS - t0))s")
img1="$(on 1 docker image inspect -f '{{.Id}}' "$IMAGE" || true)"
img2="$(on 2 docker image inspect -f '{{.Id}}' "$IMAGE" || true)"
expect "image IDs equal on both hosts" test -n "$img1" -a "$img1" == "$img2"
expect "image has no entrypoint" test "$(on 1 docker image inspect -f '{{json .Config.Entrypoint}}' "$IMAGE")" == null
expect "image carries Ray 2.53.0" bash -c "ssh $(ssh_base) root@$(mgmt_ip 1) docker run --rm $IMAGE ray --version | grep -q 2.53.0"

# --------------------------------------------------------------------------------------------- ray
say "Ray head on spark-1, worker on spark-2, both on the fabric"
mkdir -p "$WORK/spark-1/ray" "$WORK/models/tiny-model"
echo '{"architectures": ["StandinForCausalLM"]}' >"$WORK/models/tiny-model/config.json"
head -c 24 /dev/urandom | base64 | tr -d '\n/+=' >"$WORK/spark-1/api-key"
chmod 600 "$WORK/spark-1/api-key"
API_KEY="$(cat "$WORK/spark-1/api-key")"
ray_common=(--num-gpus=1 --object-store-memory=100000000 --block)
t0=$SECONDS
on 1 docker run -d --name vllm-ray-head --network host --shm-size 256m -v "$WORK/spark-1/ray:/tmp/ray" "$IMAGE" \
  ray start --head --node-ip-address="$(fab_ip 1)" --port=6379 --dashboard-host=127.0.0.1 "${ray_common[@]}" \
  >/dev/null && pass "ray head container started" || fail "ray head container"
on 2 docker run -d --name vllm-ray-worker --network host --shm-size 256m "$IMAGE" \
  ray start --address="$(fab_ip 1):6379" --node-ip-address="$(fab_ip 2)" "${ray_common[@]}" \
  >/dev/null && pass "ray worker container started" || fail "ray worker container"
ray_two_nodes() {
  local s
  s="$(on 1 docker exec vllm-ray-head ray status)" || return 1
  [[ $(sed -n '/^Active:/,/^Pending:/p' <<<"$s" | grep -c ' node_') == 2 ]] && grep -q '/2.0 GPU' <<<"$s"
}
expect "Ray cluster has 2 nodes and 2 GPUs" poll 180 "Ray to report 2 active nodes with 2 GPUs" ray_two_nodes
TIMINGS+=("ray cluster of 2 ready: $((SECONDS - t0))s")

# ------------------------------------------------------------------------------------------- serve
say "vLLM stand-in, TP=2 over Ray, API key from a file (the contract's entrypoint)"
serve_args=(--network host --ipc host -v "$WORK/spark-1/ray:/tmp/ray"
  -v "$WORK/models/tiny-model:/models/tiny-model:ro" -v "$WORK/spark-1/api-key:/run/vllm-cluster/api-key:ro")
serve_cmd=(vllm serve /models/tiny-model --served-model-name tiny --host 0.0.0.0 --port "$SERVE_PORT"
  --tensor-parallel-size 2 --pipeline-parallel-size 1 --distributed-executor-backend ray
  --gpu-memory-utilization 0.9 --max-model-len 4096 --reasoning-parser qwen3 --tool-call-parser qwen3_coder
  --enable-auto-tool-choice --trust-remote-code)
t0=$SECONDS
on 1 docker run -d --name vllm-serve -e "VLLM_HOST_IP=$(fab_ip 1)" "${serve_args[@]}" \
  --entrypoint /bin/sh "$IMAGE" -c 'VLLM_API_KEY="$(cat /run/vllm-cluster/api-key)" exec "$@"' vllm-serve \
  "${serve_cmd[@]}" >/dev/null && pass "serve container started" || fail "serve container"
URL="http://$(mgmt_ip 1):$SERVE_PORT"
health_ok() { [[ $(http -o /dev/null -w '%{http_code}' "$URL/health") == 200 ]]; }
if poll 120 "$URL/health to answer 200" health_ok; then pass "/health answers 200"; else
  fail "/health answers 200" "$(on 1 docker logs --tail 20 vllm-serve 2>&1)"
fi
TIMINGS+=("serve ready: $((SECONDS - t0))s")
chat='{"model":"tiny","messages":[{"role":"user","content":"which nodes are serving me?"}],"max_tokens":64}'
resp="$(http -H "Authorization: Bearer $API_KEY" -H 'Content-Type: application/json' -d "$chat" \
  "$URL/v1/chat/completions" || true)"
expect "chat completion names both hosts' fabric IPs" python3 -c '
import json, sys
r = json.loads(sys.argv[1]); text = r["choices"][0]["message"]["content"]
assert "10.232.0.11" in text and "10.232.0.12" in text, text
assert r["usage"]["prompt_tokens"] == 5 and r["usage"]["completion_tokens"] > 0, r["usage"]
assert {w["hostname"] for w in r["standin"]["workers"]} == {"spark-1", "spark-2"}, r["standin"]
' "$resp"
short="$(http -H "Authorization: Bearer $API_KEY" -d '{"model":"tiny","messages":[{"role":"user","content":"hi"}],"max_tokens":3}' \
  "$URL/v1/chat/completions" || true)"
expect "max_tokens is respected" python3 -c '
import json, sys
r = json.loads(sys.argv[1])
assert r["usage"]["completion_tokens"] == 3 and r["choices"][0]["finish_reason"] == "length", r
' "$short"
expect "no API key -> 401" test "$(http -o /dev/null -w '%{http_code}' -d "$chat" "$URL/v1/chat/completions")" == 401
expect "wrong API key -> 401" test "$(http -o /dev/null -w '%{http_code}' -H 'Authorization: Bearer nope' \
  "$URL/v1/models")" == 401
expect "unknown model -> 404" test "$(http -o /dev/null -w '%{http_code}' -H "Authorization: Bearer $API_KEY" \
  -d '{"model":"other","messages":[{"role":"user","content":"x"}]}' "$URL/v1/chat/completions")" == 404
expect "/v1/models is owned by the vLLM stand-in" bash -c "curl -sS -m 10 -H 'Authorization: Bearer $API_KEY' \
  $URL/v1/models | grep -q '\"owned_by\": \"vLLM stand-in\"'"
metrics="$(http "$URL/metrics" || true)"
expect "/metrics counts successful requests" grep -q 'vllm:request_success_total{finished_reason="stop",model_name="tiny"} 1' <<<"$metrics"
expect "/metrics has the stand-in info gauge" grep -q 'vllm_standin_info{.*tp="2",pp="1",max_model_len="4096"' <<<"$metrics"

mem_report "with Ray (+serve on spark-1)"

# --------------------------------------------------------------------------------------- failures
say "failure modes: wrong VLLM_HOST_IP, unknown flag, a dead Ray worker"
wrong="$(on 1 timeout 120 docker run --rm -e "VLLM_HOST_IP=$(mgmt_ip 1)" "${serve_args[@]}" "$IMAGE" \
  vllm serve /models/tiny-model --port 8002 --tensor-parallel-size 2 --distributed-executor-backend ray 2>&1)" &&
  fail "wrong VLLM_HOST_IP must fail" || pass "wrong VLLM_HOST_IP (the mgmt IP) exits non-zero"
expect "the wrong-IP message names both IPs and the fix" bash -c '
  grep -q "registered with IP 10.232.0.11" <<<"$1" && grep -q "VLLM_HOST_IP is 10.231.0.11" <<<"$1" &&
  grep -q -- "--node-ip-address" <<<"$1"' _ "$wrong"
unk="$(on 1 docker run --rm "$IMAGE" vllm serve /tmp --no-such-flag 2>&1)" && fail "unknown flag must fail" ||
  pass "unknown flag is rejected"
expect "unknown flag message is vLLM's" grep -q "unrecognized arguments: --no-such-flag" <<<"$unk"
on 2 docker rm -f vllm-ray-worker >/dev/null
serve_exited() { [[ $(on 1 docker inspect -f '{{.State.Status}} {{.State.ExitCode}}' vllm-serve) == "exited 1" ]]; }
expect "a dead Ray worker stops the server with exit code 1" poll 90 "vllm-serve to exit with code 1" serve_exited
expect "server logs say the engine is dead" bash -c "ssh $(ssh_base) root@$(mgmt_ip 1) docker logs vllm-serve 2>&1 |
  grep -q 'engine dead'"

# ---------------------------------------------------------------------------------- scale and down
say "scale to 4 hosts, then down"
on 1 docker rm -f vllm-serve vllm-ray-head >/dev/null || true
before="$(cat /run/vcl-h1/docker.pid /run/vcl-h2/docker.pid 2>/dev/null | tr '\n' ' ')"
timed "up 4 after up 2" "$TB" up 4 >/dev/null 2>&1 && pass "up 4 after up 2" || fail "up 4 after up 2"
expect "up 4 kept spark-1/2's engines" test "$before" == "$(cat /run/vcl-h1/docker.pid /run/vcl-h2/docker.pid | tr '\n' ' ')"
expect "spark-4 answers over ssh" test "$(on 4 hostname)" == spark-4
expect "spark-4 does not have the image (spark-1 only)" bash -c "! ssh $(ssh_base) root@$(mgmt_ip 4) docker image inspect $IMAGE"
timed "down (4 hosts)" "$TB" down && pass "testbed down" || fail "testbed down"
leftover() {
  ip netns list | grep -q '^vcl-h' && return 1
  ip -o link show | grep -q ' vcl-' && return 1
  findmnt -rn -o TARGET | grep -q -e "^$STATE/hosts" -e '^/run/vcl-h' && return 1
  compgen -G '/run/vcl-h*' >/dev/null && return 1
  [[ ! -e $STATE/hosts && ! -e $STATE/hosts.json ]]
}
expect "nothing of the testbed is left" leftover
if [[ $KEEP == 1 ]]; then timed "up 2 (kept)" "$TB" up 2 >/dev/null 2>&1 || fail "up 2 for KEEP"; fi

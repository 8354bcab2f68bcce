#!/usr/bin/env bash
# The manual deployment, step by step as an operator does it by hand (the procedure this project automates): the
# baseline `npm run bench` measures `pulumi up` against, on the same hosts, image and model.
#
#   bench/manual.sh up     copy the image to every other host (docker save | ssh | docker load, one host after
#                          another), start the Ray head, then each worker, wait for `ray status` to list every
#                          host, start `vllm serve` inside the head container, wait for a chat completion
#   bench/manual.sh down   remove the containers it started
#
# Environment (bench/bench.test.ts sets it from the stack file):
#   MANUAL_SSH_CONFIG  ssh config with host keys pinned     MANUAL_HOSTS   "host=fabricIp ..." head first
#   MANUAL_IMAGE       image ref, present on the head        MANUAL_MODEL   "hostPath:containerPath:servedName"
#   MANUAL_ENV_<i>     "K=V K=V" extra environment for host i (0 = head)
#   MANUAL_SERVE_ARGS  extra `vllm serve` arguments          MANUAL_PORT    serve port (API key: MANUAL_KEY)
set -euo pipefail
: "${MANUAL_SSH_CONFIG:?}" "${MANUAL_HOSTS:?}" "${MANUAL_IMAGE:?}" "${MANUAL_MODEL:?}" "${MANUAL_PORT:?}"
read -r -a hosts <<<"$MANUAL_HOSTS"
IFS=: read -r model_host model_ctr model_name <<<"$MANUAL_MODEL"
on() {
  local h=$1
  shift
  ssh -F "$MANUAL_SSH_CONFIG" "$h" "$(printf '%q ' "$@")"
}
step() { printf '[manual %s] %s\n' "$(date +%T)" "$*" >&2; }

run_ray() { # index, name, ray start arguments...
  local i=$1 name=$2 host=${hosts[$1]%%=*} ip=${hosts[$1]#*=}
  shift 2
  local envs=() kv var="MANUAL_ENV_$i"
  for kv in ${!var:-}; do envs+=(-e "$kv"); done
  on "$host" docker run -d --name "$name" --network host --ipc host --shm-size 256m \
    -v "/tmp/manual-$i:/tmp" -e "VLLM_HOST_IP=$ip" "${envs[@]}" -v "$model_host:$model_ctr:ro" \
    --entrypoint /usr/bin/env "$MANUAL_IMAGE" ray start --block --node-ip-address="$ip" --num-gpus=1 \
    --disable-usage-stats "$@" >/dev/null
}

up() {
  local head=${hosts[0]%%=*} head_ip=${hosts[0]#*=} i
  for ((i = 1; i < ${#hosts[@]}; i++)); do
    step "copying $MANUAL_IMAGE to ${hosts[$i]%%=*}"
    on "$head" docker save "$MANUAL_IMAGE" | on "${hosts[$i]%%=*}" docker load >/dev/null
  done
  for ((i = 0; i < ${#hosts[@]}; i++)); do on "${hosts[$i]%%=*}" mkdir -p "/tmp/manual-$i"; done
  step "starting the Ray head on $head"
  run_ray 0 manual-ray-head --head --port=6379 --dashboard-host=127.0.0.1 --object-store-memory=100000000
  for ((i = 1; i < ${#hosts[@]}; i++)); do
    step "starting a Ray worker on ${hosts[$i]%%=*}"
    run_ray "$i" manual-ray-worker --address="$head_ip:6379" --object-store-memory=100000000
  done
  step "waiting for ray status to list ${#hosts[@]} nodes"
  until [[ $(on "$head" docker exec manual-ray-head ray status 2>/dev/null | grep -c ' node_') -ge ${#hosts[@]} ]]; do
    sleep 2
  done
  step "starting vllm serve in the head container"
  # shellcheck disable=SC2086 # MANUAL_SERVE_ARGS is a word list on purpose
  on "$head" docker exec -d -e "VLLM_API_KEY=${MANUAL_KEY:?}" manual-ray-head sh -c \
    "$(printf '%q ' vllm serve "$model_ctr" --served-model-name "$model_name" --host 0.0.0.0 --port "$MANUAL_PORT" \
      --distributed-executor-backend ray --tensor-parallel-size "${#hosts[@]}" $MANUAL_SERVE_ARGS) >/tmp/serve.log 2>&1"
  step "waiting for a chat completion"
  local body
  body=$(printf '{"model":"%s","messages":[{"role":"user","content":"Hello"}],"max_tokens":4}' "$model_name")
  until on "$head" curl -sf -o /dev/null --max-time 60 -H "Authorization: Bearer $MANUAL_KEY" \
    -H 'Content-Type: application/json' -d "$body" "http://127.0.0.1:$MANUAL_PORT/v1/chat/completions"; do
    sleep 2
  done
  step "serving"
}

down() {
  local i
  for ((i = 0; i < ${#hosts[@]}; i++)); do
    on "${hosts[$i]%%=*}" sh -c 'docker rm -f manual-ray-head manual-ray-worker >/dev/null 2>&1; true'
  done
}

case "${1:-}" in
  up) up ;;
  down) down ;;
  *)
    echo "usage: bench/manual.sh up|down" >&2
    exit 2
    ;;
esac

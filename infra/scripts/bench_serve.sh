#!/bin/sh
# `npm run bench:serve` on the head (setup/benchServe.js): infra/scripts/bench_serve.py (the BENCH argument,
# base64) run in the image the serve container runs, with the host's network (it is a client of the head's own
# API, as a user on the head would be), the model directory read-only (the tokenizer), and with TLS the stack's own
# certificate as the only trust. No port, no label: a client that ends when the benchmark ends, removed then.
#
#   bench_serve.sh node=NAME serve=CONTAINER model-path=PATH cert=[PATH] bench=BASE64 < KEY-AND-PLAN
#
# stdin passes through to the benchmark: the API key on its first line, the plan on the next (never on a command
# line). Prints two JSON lines: {"image": ID, "container": NAME} (what it ran), then the benchmark's own line; exits
# with the benchmark's status, or 1 naming the node when it could not start it.
set -u
node='' serve='' model='' cert='' bench=''
while [ $# -gt 0 ]; do
    case "$1" in
        node=*) node=${1#*=} ;;
        serve=*) serve=${1#*=} ;;
        model-path=*) model=${1#*=} ;;
        cert=*) cert=${1#*=} ;;
        bench=*) bench=${1#*=} ;;
        *) echo "bench_serve: unknown argument: $1" >&2; exit 2 ;;
    esac
    shift
done
[ -n "$node" ] && [ -n "$serve" ] && [ -n "$model" ] && [ -n "$bench" ] ||
    { echo "bench_serve: usage: node=NAME serve=CONTAINER model-path=PATH cert=[PATH] bench=BASE64" >&2; exit 2; }
fail() { echo "bench:serve on node $node: $*" >&2; exit 1; }
py=$(printf %s "$bench" | base64 -d) || fail "the benchmark script is not base64"

running=$(docker inspect --format '{{.State.Running}} {{.Image}}' "$serve" 2>/dev/null) ||
    fail "no container $serve here: is the cluster deployed (pulumi up)?"
case "$running" in
    "true "*) image=${running#true } ;;
    *) fail "$serve is not running: the benchmark needs a serving cluster (npm run status says what it is doing)" ;;
esac
[ -d "$model" ] || fail "the model directory $model is not here"

# one benchmark at a time on a cluster (two would measure each other): the name is taken while one runs
name="$serve-bench"
if docker inspect --format '{{.State.Status}}' "$name" >/dev/null 2>&1; then
    fail "a benchmark is already running here (container $name); if none is, remove it: docker rm -f $name"
fi
set -- docker run --rm -i --name "$name" --network host --tmpfs /tmp -e HOME=/tmp -e HF_HUB_OFFLINE=1 \
    -v "$model:/model:ro"
if [ -n "$cert" ]; then
    [ -f "$cert" ] || fail "the API's certificate $cert is not here"
    set -- "$@" -v "$cert:/run/vllm-cluster/bench-ca.pem:ro" -e SSL_CERT_FILE=/run/vllm-cluster/bench-ca.pem
fi
printf '{"image":"%s","container":"%s"}\n' "$image" "$name"
exec "$@" --entrypoint python3 "$image" -c "$py"

#!/usr/bin/env bash
# Serve readiness, run on the head host: poll /health (bounded; fails early when the container died), then send
# one real chat completion authenticated with the key read from the key file, then one without it, which must get
# 401 (a server that answers without its key is open, not ready).
#
#   serve_readiness.bash node=NAME container=NAME port=N key-file=PATH status-file=PATH timeout=SECONDS
#                        body=JSON [interval=SECONDS] [tls=yes|no] [mode=wait|look]
#
# STATUS-FILE is where the container's init (container_init.sh) writes its verdict: an OOM kill under the memory
# ceiling, the memory guard's stop and a used-up crash budget each end the wait at once, named.
#
# The Authorization header reaches curl through a config file on a process substitution, so the key is never on
# a command line. Prints one JSON line: {"ready":true,"node","port","completionSeconds"}, the last the completion's
# latency; the wait (mode=wait, after a container was made) adds the launch: "readySeconds", from the container's
# start to that completion's answer, and "startedAt". A look (mode=look, at refresh) is no launch and says none.
# Both add "watchdog" when the serve watchdog restarted this container: when and why.
set -uo pipefail

node='' container='' port='' keyfile='' statusfile='' timeout='' body='' interval=1 tls=no mode=wait
for a in "$@"; do
    case "$a" in
        node=*) node=${a#*=} ;;
        container=*) container=${a#*=} ;;
        port=*) port=${a#*=} ;;
        key-file=*) keyfile=${a#*=} ;;
        status-file=*) statusfile=${a#*=} ;;
        timeout=*) timeout=${a#*=} ;;
        body=*) body=${a#*=} ;;
        interval=*) interval=${a#*=} ;;
        tls=*) tls=${a#*=} ;;
        mode=wait | mode=look) mode=${a#*=} ;;
        *) echo "serve_readiness: unknown argument: $a" >&2; exit 2 ;;
    esac
done
for v in node container port keyfile statusfile timeout body; do
    [ -n "${!v}" ] || { echo "serve_readiness: missing argument $v" >&2; exit 2; }
done

base="http://127.0.0.1:$port"
if [ "$tls" = yes ]; then
    base="https://127.0.0.1:$port"
    # over loopback on the head itself: the certificate names the address clients use, not 127.0.0.1
    curl() { command curl --insecure "$@"; }
fi
deadline=$(($(date +%s) + timeout))
logs() { docker logs --tail 12 "$container" 2>&1 | sed 's/^/  | /' >&2 || true; }
# The server's last log lines first, then the verdict: the error's last line always says what failed.
fail() { logs; echo "$container on node $node: $*" >&2; exit 1; }
auth() { printf 'header = "Authorization: Bearer %s"\n' "$(cat "$keyfile")"; }
# The init's verdict for this very container (a replaced container's old verdict is not its own).
verdict() {
    local id line
    id=$(docker inspect -f '{{.Id}}' "$container" 2>/dev/null) || return 0
    [ -r "$statusfile" ] && IFS= read -r line <"$statusfile" || return 0
    [ "${line%% *}" = "$id" ] && printf '%s' "${line#* }"
}

[ -r "$keyfile" ] || fail "API key file $keyfile is missing or unreadable"
code=000
while :; do
    code=$(curl -s -o /dev/null -w '%{http_code}' --max-time 5 "$base/health" || true)
    [ "$code" = 200 ] && break
    state=$(docker inspect -f '{{.State.Status}}' "$container" 2>/dev/null || echo missing)
    v=$(verdict)
    case "$v" in
        OOM-killed* | "memory guard"* | "crash budget exhausted"*) fail "$v (container $state)" ;;
    esac
    case "$state" in exited | dead | missing) fail "container is $state before /health answered${v:+ ($v)}" ;; esac
    [ "$(date +%s)" -lt "$deadline" ] || fail "/health did not return 200 within ${timeout}s (last HTTP $code, container $state)"
    sleep "$interval"
done
left=$((deadline - $(date +%s)))
[ "$left" -ge 30 ] || left=30
resp=$(curl -sS --max-time "$left" -K <(auth) -H 'Content-Type: application/json' -d "$body" -w '\n%{http_code} %{time_total}' "$base/v1/chat/completions") ||
    fail "chat completion request failed"
answered=$(date +%s.%N)
last=${resp##*$'\n'}
code=${last%% *}
took=''
case "$last" in *' '*) took=${last#* } ;; esac
[ "$code" = 200 ] || fail "chat completion returned HTTP $code"
case "$resp" in *'"choices"'*) ;; *) fail "chat completion answer has no choices" ;; esac
# Fail closed: a server that answers without the key is not ready, it is open.
code=$(curl -s -o /dev/null -w '%{http_code}' --max-time 30 -H 'Content-Type: application/json' -d "$body" "$base/v1/chat/completions" || true)
[ "$code" = 401 ] || fail "a chat completion without the API key returned HTTP $code, not 401: the server does not enforce its key"
# The figures only as numbers (curl's and date's own output, checked), and the start only as docker's timestamp
number() { [[ $1 =~ ^[0-9]+(\.[0-9]+)?$ ]] && printf '%s' "$1"; }
launch=''
if [ "$mode" = wait ]; then
    started=$(docker inspect -f '{{.State.StartedAt}}' "$container" 2>/dev/null || true)
    if [[ $started =~ ^[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9:.]+Z$ ]] && since=$(date -d "$started" +%s.%N 2>/dev/null); then
        ready=$(awk -v a="$answered" -v b="$since" 'BEGIN { d = a - b; if (d >= 0) printf "%.1f", d }')
        [ -z "$(number "$ready")" ] || launch=",\"readySeconds\":$ready,\"startedAt\":\"$started\""
    fi
fi
# The watchdog's last restart of this very container (container_init.sh writes "<container ID> <time> <text>" next
# to the verdict), so that a refresh names it: printable text only, quotes and backslashes escaped, bounded.
dog=''
# (the directory is shared with the node's containers: read never through a link, never waiting on a FIFO)
dogfile=${statusfile%.status}.watchdog
if id=$(docker inspect -f '{{.Id}}' "$container" 2>/dev/null) && [ -f "$dogfile" ] && [ ! -L "$dogfile" ] &&
    line=$(dd if="$dogfile" iflag=nofollow,nonblock bs=4096 count=1 status=none 2>/dev/null | head -n 1) &&
    [ "${line%% *}" = "$id" ]; then
    dog=",\"watchdog\":\"$(printf '%s' "${line#* }" | LC_ALL=C tr -cd '[:print:]' | cut -c1-300 | sed 's/[\\"]/\\&/g')\""
fi
printf '{"ready":true,"node":"%s","port":%s,"completionSeconds":%s%s%s}\n' "$node" "$port" "$(number "$took" || echo null)" "$launch" "$dog"

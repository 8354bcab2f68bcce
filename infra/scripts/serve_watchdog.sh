#!/bin/sh
# The serve watchdog (serve.watchdog, backend ray), shipped by content into the serve container's Entrypoint between
# its init (container_init.sh) and the server's own entrypoint:
#
#   serve_watchdog.sh name=CONTAINER node=NODE state-dir=DIR probe=BASE64 probe-arg=ARG every=S timeout=T misses=N
#                     max-restarts=M -- COMMAND...
#
# A server whose process lives but no longer answers (a rank stuck in a collective, a stopped engine core) keeps
# /health at 200: only a real completion proves service. This starts one loop in the background, then becomes
# COMMAND (exec), so the server is still the init's own child and group leader, as without a watchdog. Once the init
# has called the server healthy (DIR/NAME.status: "<container ID> healthy"), the loop runs the probe (PROBE, base64:
# infra/scripts/serve_watchdog.py, one completion with the key) at once and then every S seconds, with ARG and T:
# exit 0 is serving, 1 a miss, anything else not judged (busy for others, an answer that is no completion). After N
# misses in a row it writes the event to DIR/NAME.watchdog ("<container ID> <UTC time> no completion within T s, N
# times: restarted (last: <why>)") and kills the server's process group, itself with it: the init sees the server
# end, the on-failure policy starts the container again, and the start counts against the crash budget.
#
# A server that hangs at every start would be restarted for ever, since each new start becomes healthy: the
# watchdog's restarts are counted in DIR/NAME.hangs ("<container ID> <count>"), back to 0 at the first answered
# completion; after M of them in a row (serve.maxRestarts) it writes DIR/NAME.guard instead, and the init, which
# reads that file when its command ends, keeps the container stopped and names why.
#
# DIR is shared, read-write, by every project container of the node: files are written as container_init.sh writes
# them (a fresh name created exclusively, never through a link, then renamed over) and read only as regular files.
set -u

name='' node='' dir='' probe='' arg='' every='' timeout='' misses='' max=''
while [ $# -gt 0 ]; do
    case "$1" in
        name=*) name=${1#*=} ;;
        node=*) node=${1#*=} ;;
        state-dir=*) dir=${1#*=} ;;
        probe=*) probe=${1#*=} ;;
        probe-arg=*) arg=${1#*=} ;;
        every=*) every=${1#*=} ;;
        timeout=*) timeout=${1#*=} ;;
        misses=*) misses=${1#*=} ;;
        max-restarts=*) max=${1#*=} ;;
        --) shift; break ;;
        *) echo "serve-watchdog: unknown argument: $1" >&2; exit 64 ;;
    esac
    shift
done
case "$every$timeout$misses$max" in *[!0-9]*) echo "serve-watchdog: every, timeout, misses and max-restarts are whole numbers" >&2; exit 64 ;; esac
[ -n "$name" ] && [ -n "$node" ] && [ -n "$dir" ] && [ -n "$probe" ] && [ -n "$arg" ] && [ -n "$max" ] &&
    [ "${every:-0}" -gt 0 ] && [ "${timeout:-0}" -gt 0 ] && [ "${misses:-0}" -gt 0 ] && [ $# -gt 0 ] ||
    { echo "serve-watchdog: usage: name=NAME node=NODE state-dir=DIR probe=BASE64 probe-arg=ARG every=S timeout=T misses=N max-restarts=M -- COMMAND..." >&2; exit 64; }

cid=$(sed -n 's|.*/containers/\([0-9a-f]\{64\}\)/.*|\1|p' /proc/self/mountinfo 2>/dev/null | head -n 1)
[ -n "$cid" ] || cid=unknown

say() { echo "vllm-cluster: $name on node $node: watchdog: $*" >&2; }
put() { # file text: written whole or not at all, never through a link
    put_tmp=$(mktemp "${1%/*}/.${1##*/}.XXXXXX") && rm -f "$put_tmp" || return 1
    if printf '%s\n' "$2" | dd of="$put_tmp" oflag=nofollow conv=excl status=none 2>/dev/null && mv -f -T "$put_tmp" "$1"; then
        return 0
    fi
    rm -f "$put_tmp"
    return 1
}
get() { # file: its first 4 KiB when it is a regular file (never through a link, never waiting on a FIFO)
    [ -f "$1" ] && [ ! -L "$1" ] && dd if="$1" iflag=nofollow,nonblock bs=4096 count=1 status=none 2>/dev/null
}
# the watchdog's restarts of this container since a completion last answered
hangs() {
    h_id='' h_n=''
    read -r h_id h_n <<EOF || true
$(get "$dir/$name.hangs")
EOF
    case "$h_n" in '' | *[!0-9]*) h_n=0 ;; esac
    [ "$h_id" = "$cid" ] && echo "$h_n" || echo 0
}

watch() {
    trap - TERM INT
    code=$(printf %s "$probe" | base64 -d) || { say "cannot decode its probe: not watching"; exit 0; }
    until [ "$(get "$dir/$name.status")" = "$cid healthy" ]; do sleep 1; done
    say "a completion every $every s, each within $timeout s; $misses missed in a row restart the server"
    missed=0 proven=0
    while :; do
        why=$(python3 -c "$code" "$arg" "$timeout" 2>&1)
        rc=$?
        why=$(printf '%s\n' "$why" | tail -n 1 | cut -c1-200)
        case "$rc" in
            0)
                missed=0
                if [ "$proven" = 0 ]; then
                    proven=1
                    put "$dir/$name.hangs" "$cid 0" || true
                fi
                ;;
            1)
                missed=$((missed + 1))
                say "no completion ($why), $missed of $misses"
                if [ "$missed" -ge "$misses" ]; then
                    n=$(($(hangs) + 1))
                    text="no completion within $timeout s, $misses times"
                    if [ "$n" -gt "$max" ]; then
                        # the init reads it when the server ends: the container stays stopped, named
                        put "$dir/$name.guard" "watchdog: $text, after $max restarts by the watchdog without an answered completion (serve.maxRestarts)" ||
                            say "cannot write $dir/$name.guard"
                        text="$text: stopped for good after $max restarts without an answered completion"
                    else
                        put "$dir/$name.hangs" "$cid $n" || true
                        text="$text: restarted"
                    fi
                    put "$dir/$name.watchdog" "$cid $(date -u +%Y-%m-%dT%H:%M:%SZ) $text (last: $why)" || say "cannot write $dir/$name.watchdog"
                    say "$text"
                    # the server's whole process group: the server (the init's child), its engine, this loop
                    kill -KILL 0
                fi
                ;;
            *) missed=0 ;; # not judged: busy generating for others, or an answer that is no completion (a 4xx)
        esac
        sleep "$every"
    done
}
watch &
exec "$@"

#!/bin/sh
# PID 1 of every project container (shipped by content as the first part of its Entrypoint; the container's own
# entrypoint and command follow after --). It keeps a node safe when nobody is watching:
#
#   container_init.sh name=CONTAINER node=NODE state-dir=DIR max-starts=N
#                     [healthy-url=URL | stable-seconds=S] [min-available-kib=K] [check-seconds=S]
#                     [floor-grace-seconds=G] [ceiling=TEXT] [wait-tcp=HOST:PORT] [wait-python=BASE64 [wait-arg=ARG]]
#                     -- COMMAND...
#
# - Crash budget that survives reboots: every start of COMMAND is counted in DIR/NAME.starts (a host directory,
#   on disk), keyed by this container's ID so a new container starts with a fresh budget. A start that would be
#   start number N+1 since COMMAND last became healthy (URL answered 200, or it ran S seconds) is not made: the
#   container exits 0 and stays stopped, since Docker's on-failure policy restarts neither a clean exit nor, after
#   the engine restarts, a container that ended cleanly. (Docker's own restart count starts again at 0 whenever
#   the engine restarts, so it alone cannot bound a crash loop across reboots.)
# - Memory floor: with K > 0, COMMAND is not started while the host's MemAvailable is below K KiB (after waiting G
#   seconds, default 30, for it to rise), and is killed (its whole process group) when MemAvailable falls below K
#   while it runs, checked every S seconds. The container then stays stopped. It reads the host's /proc/meminfo, so it holds whether or not the memory a process takes
#   (GPU allocations on a unified-memory host among it) is charged to this container's cgroup.
# - A process killed by the kernel's OOM killer under the container's memory ceiling (its cgroup's oom_kill count
#   grew) is named with CEILING.
# - Reboots: a stop signal (the engine stopping, as at a reboot) is passed to COMMAND and the container exits 143,
#   so the on-failure policy starts it again when the engine comes back. Before COMMAND starts, the container
#   waits, unbounded and without spending its budget, for what it needs: a TCP port (WAIT_TCP) or a Python check
#   (WAIT_PYTHON, base64, run with WAIT_ARG until it exits 0).
#
# Each verdict is one line "<container ID> <text>" in DIR/NAME.status, which serve readiness reads to name it.
#
# DIR is shared, read-write, by every project container of the node, so a file there may have been replaced by a
# link by another container: each file is written under a new name mktemp picks in DIR, created exclusively and
# never through a link (dd oflag=nofollow conv=excl), then renamed over its name (which replaces a link rather than
# following it); each is read only when it is a regular file, never through a link and never blocking on a FIFO.
set -u

name='' node='' dir='' max='' url='' stable=60 floor=0 every=1 grace=30 ceiling='' wait_tcp='' wait_py='' wait_arg=''
while [ $# -gt 0 ]; do
    case "$1" in
        name=*) name=${1#*=} ;;
        node=*) node=${1#*=} ;;
        state-dir=*) dir=${1#*=} ;;
        max-starts=*) max=${1#*=} ;;
        healthy-url=*) url=${1#*=} ;;
        stable-seconds=*) stable=${1#*=} ;;
        min-available-kib=*) floor=${1#*=} ;;
        check-seconds=*) every=${1#*=} ;;
        floor-grace-seconds=*) grace=${1#*=} ;;
        ceiling=*) ceiling=${1#*=} ;;
        wait-tcp=*) wait_tcp=${1#*=} ;;
        wait-python=*) wait_py=${1#*=} ;;
        wait-arg=*) wait_arg=${1#*=} ;;
        --) shift; break ;;
        *) echo "container-init: unknown argument: $1" >&2; exit 64 ;;
    esac
    shift
done
case "$max$floor$every$stable$grace" in *[!0-9]*) echo "container-init: max-starts, min-available-kib, check-seconds, stable-seconds and floor-grace-seconds are whole numbers" >&2; exit 64 ;; esac
[ -n "$name" ] && [ -n "$node" ] && [ -n "$dir" ] && [ -n "$max" ] && [ "$every" -gt 0 ] && [ $# -gt 0 ] ||
    { echo "container-init: usage: name=NAME node=NODE state-dir=DIR max-starts=N [...] -- COMMAND..." >&2; exit 64; }

# This container's ID, from the engine's own files mounted into it (hostname, hosts, resolv.conf).
cid=$(sed -n 's|.*/containers/\([0-9a-f]\{64\}\)/.*|\1|p' /proc/self/mountinfo 2>/dev/null | head -n 1)
[ -n "$cid" ] || cid=unknown

say() { echo "vllm-cluster: $name on node $node: $*" >&2; }
put() { # file text: written whole or not at all, never through a link
    # a name no other container can guess ($$ is 1 in every container); made again exclusively, with the umask's mode
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
verdict() { put "$dir/$name.status" "$cid $*" || say "cannot write $dir/$name.status"; }
# Stop for good: a clean exit, which the on-failure policy never restarts (not after a reboot either).
stay_down() { say "$*; the container stays stopped"; verdict "$*"; exit 0; }

mem_available() { # KiB, from the host's /proc/meminfo (the same in every container of the host)
    while read -r k v _; do
        [ "$k" = MemAvailable: ] && { echo "$v"; return 0; }
    done </proc/meminfo
    echo 0
}
gib() { awk -v k="$1" 'BEGIN { printf "%.1f GiB", k / 1048576 }'; }
floor_text() { echo "MemAvailable $(gib "$1") is below the floor of $(gib "$floor") (memoryGuard.minAvailable)"; }

oom_kills() { # the container cgroup's OOM kills so far (cgroup v2 memory.events, v1 memory.oom_control)
    for f in /sys/fs/cgroup/memory.events /sys/fs/cgroup/memory/memory.oom_control; do
        if [ -r "$f" ]; then
            while read -r k v; do [ "$k" = oom_kill ] && { echo "$v"; return 0; }; done <"$f"
        fi
    done
    echo 0
}

[ -d "$dir" ] && [ -w "$dir" ] || stay_down "its state directory $dir is missing or not writable: refusing to start without a crash budget"
rm -f "$dir/$name.guard"

stopping=0
trap 'stopping=1' TERM INT
oom0=$(oom_kills)

if [ "$floor" -gt 0 ]; then
    a=$(mem_available) end=$(($(date +%s) + grace))
    while [ "$a" -lt "$floor" ] && [ "$(date +%s)" -lt "$end" ]; do
        [ "$stopping" = 0 ] || exit 143
        sleep "$every"
        a=$(mem_available)
    done
    [ "$a" -ge "$floor" ] || stay_down "memory guard: not started: $(floor_text "$a")"
fi

# Preconditions: wait without spending the budget (after a reboot the head comes back before the others).
ready() {
    if [ -n "$wait_tcp" ]; then
        python3 -c 'import socket, sys; h, p = sys.argv[1].rsplit(":", 1); socket.create_connection((h, int(p)), 3).close()' "$wait_tcp" 2>/dev/null || return 1
    fi
    if [ -n "$wait_py" ]; then
        wait_rc=0
        wait_err=$(python3 -c "$(printf %s "$wait_py" | base64 -d)" "$wait_arg" 2>&1 >/dev/null) || wait_rc=1
        put "$dir/$name.wait" "$wait_err" || true
        return "$wait_rc"
    fi
    return 0
}
said=0
until ready; do
    # a check that the ceiling cannot even hold will never pass: an OOM kill here ends the wait
    [ "$(oom_kills)" = "$oom0" ] || stay_down "OOM-killed under its memory ceiling of ${ceiling:-(none set)} while waiting for its preconditions"
    [ "$said" = 1 ] || { say "waiting for its preconditions (${wait_tcp:+TCP $wait_tcp }${wait_py:+a check of the Ray cluster})"; said=1; }
    [ "$stopping" = 0 ] || exit 143
    sleep 2
done
[ "$said" = 0 ] || say "preconditions met"

# The budget: starts since COMMAND last became healthy, for this container.
n=0 id='' count=''
starts=$(get "$dir/$name.starts") || starts=''
read -r id count <<EOF || true
$starts
EOF
[ "${id:-}" = "$cid" ] && n=${count:-0}
case "$n" in '' | *[!0-9]*) n=$max ;; esac
[ "$n" -lt "$max" ] || stay_down "crash budget exhausted: $n starts without becoming healthy (at most $max: serve.maxRestarts + 1)"
n=$((n + 1))
put "$dir/$name.starts" "$cid $n" || stay_down "cannot record its start in $dir: refusing to start without a crash budget"
verdict "start $n of at most $max"

# its own process group (setsid, never forking here: a background job is no group leader), so a guard kill or a
# stop reaches every process it started
setsid "$@" &
child=$!

# The watcher: the memory floor every check-seconds; the budget back to 0 once COMMAND is healthy.
watch() {
    trap - TERM INT
    healthy=0 t0=$(date +%s)
    while sleep "$every"; do
        if [ "$floor" -gt 0 ]; then
            a=$(mem_available)
            if [ "$a" -lt "$floor" ]; then
                put "$dir/$name.guard" "memory guard: stopped: $(floor_text "$a")"
                kill -KILL "-$child" 2>/dev/null || kill -KILL "$child" 2>/dev/null
                exit 0
            fi
        fi
        if [ "$healthy" = 0 ]; then
            if [ -n "$url" ]; then
                python3 -c 'import ssl, sys, urllib.request as u; u.urlopen(sys.argv[1], timeout=3, context=ssl._create_unverified_context())' "$url" >/dev/null 2>&1 && healthy=1
            elif [ $(($(date +%s) - t0)) -ge "$stable" ]; then
                healthy=1
            fi
            if [ "$healthy" = 1 ]; then
                put "$dir/$name.starts" "$cid 0"
                verdict "healthy"
            fi
        fi
    done
}
watch &
watcher=$!

forwarded=0
while :; do
    wait "$child"
    rc=$?
    if [ "$stopping" = 1 ] && [ "$forwarded" = 0 ]; then
        forwarded=1
        kill -TERM "-$child" 2>/dev/null || kill -TERM "$child" 2>/dev/null
    fi
    kill -0 "$child" 2>/dev/null || break
done
# KILL: a just-forked watcher may still carry the TERM trap of this shell and would outlive a TERM
kill -KILL "$watcher" 2>/dev/null
wait "$watcher" 2>/dev/null

guard=$(get "$dir/$name.guard") || guard=''
[ -z "$guard" ] || stay_down "$guard"
if [ "$stopping" = 1 ]; then
    say "stopped by a signal (exit $rc); exits 143 so the engine starts it again when it comes back"
    verdict "stopped by a signal"
    exit 143
fi
if [ "$(oom_kills)" != "$oom0" ]; then
    say "OOM-killed under its memory ceiling of ${ceiling:-(none set)} (exit $rc)"
    verdict "OOM-killed under its memory ceiling of ${ceiling:-(none set)}"
    exit 137
fi
say "exited with $rc (start $n of at most $max)"
verdict "exited with $rc (start $n of at most $max)"
# A service that ends by itself failed, whatever its status (vLLM's server ends with 0 once its engine died): the
# on-failure policy restarts it, within the budget. Only the init itself ends cleanly, when it stays stopped.
[ "$rc" -ne 0 ] || rc=1
exit "$rc"

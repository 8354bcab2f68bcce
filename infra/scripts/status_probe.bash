#!/usr/bin/env bash
# What `npm run status` asks one host (setup/status.js), as the login user over the program's own ssh options, one
# session per host and refresh. It only reads: docker ps and inspect, the stack's init files, /proc/meminfo, df,
# and on the head vLLM's /metrics over loopback and Ray's live members (ray_members.py in the head container, which
# asks the GCS for its node table). Prints one JSON object:
#
#   {"probe":"status","node","time" (the host's clock, s),"memory":{"totalKib","availableKib"},
#    "disk":{"path","freeBytes"},"docker":{"ok","error"},"containers":[{"id","name","role","rank","state",
#    "startedAt","finishedAt","exitCode","oomKilled","restartCount","initArgs","initStarts","initStatus","initWatchdog"}],
#    "metrics":{"ok","text"|"error"},"ray":{"ok","text"}}
#
# initStarts, initStatus and initWatchdog are the first lines of the init's files as they are ("<container id> <starts>",
# "<container id> <verdict>", "<container id> <time> <watchdog restart>"; infra/scripts/container_init.sh writes them); the status view matches the IDs. Every string is a JSON string
# made here, whatever bytes the files hold; the view makes each printable again (a host may lie).
#
#   status_probe.bash node=NAME init-dir=DIR model-path=PATH stack-label=LABEL stack=STACK cluster-label=LABEL
#                     cluster=[NAME] role-label=LABEL rank-label=LABEL [metrics-port=N tls=yes|no] [ray-container=NAME ray-probe=BASE64 ray-address=IP:PORT]
set -uo pipefail

node='' init_dir='' model_path='' stack_label='' stack='' cluster_label='' cluster='' cluster_given='' role_label='' rank_label='' port='' tls=no ray_container='' ray_b64='' ray_address=''
# shellcheck disable=SC2034 # cluster_given: read through ${!v} below (cluster= may be empty, but must be given)
for a in "$@"; do
    case "$a" in
        node=*) node=${a#*=} ;;
        init-dir=*) init_dir=${a#*=} ;;
        model-path=*) model_path=${a#*=} ;;
        stack-label=*) stack_label=${a#*=} ;;
        stack=*) stack=${a#*=} ;;
        cluster-label=*) cluster_label=${a#*=} ;;
        cluster=*) cluster=${a#*=}; cluster_given=yes ;;
        role-label=*) role_label=${a#*=} ;;
        rank-label=*) rank_label=${a#*=} ;;
        metrics-port=*) port=${a#*=} ;;
        tls=*) tls=${a#*=} ;;
        ray-container=*) ray_container=${a#*=} ;;
        ray-probe=*) ray_b64=${a#*=} ;;
        ray-address=*) ray_address=${a#*=} ;;
        *) echo "status_probe: unknown argument: $a" >&2; exit 2 ;;
    esac
done
for v in node init_dir model_path stack_label stack cluster_label cluster_given role_label rank_label; do
    [ -n "${!v}" ] || { echo "status_probe: missing argument ${v//_/-}" >&2; exit 2; }
done

# stdin as one JSON string: \ and " escaped, C0 controls and DEL as \u00XX, other bytes as they are, lines joined by \n
jstr() {
    tr -d '\000' | LC_ALL=C awk 'BEGIN {
        for (i = 1; i < 256; i++) { c = sprintf("%c", i); e[c] = (i < 32 || i == 127) ? sprintf("\\u%04x", i) : c }
        e["\\"] = "\\\\"; e["\""] = "\\\""; printf "\""
    }
    { if (NR > 1) printf "\\n"; out = ""; n = length($0); for (i = 1; i <= n; i++) out = out e[substr($0, i, 1)]; printf "%s", out }
    END { printf "\"" }'
}
# the first line of a file the node's containers write: only a regular file, never through a link, never a FIFO
first_line() {
    [ -f "$1" ] && [ ! -L "$1" ] || return 1
    dd if="$1" iflag=nofollow,nonblock bs=4096 count=1 status=none 2>/dev/null | head -n 1
}
file_json() { # FILE: its first line as a JSON string, or null
    local line
    line=$(first_line "$1") && printf '%s' "$line" | jstr || printf null
}
tail_json() { cut -c1-400 | tail -n 20 | jstr; }

# Ray's members, from the head container while the rest is read (python and ray's import take about half a second)
ray_view() {
    local out rc
    # the bound keeps a hung GCS from holding the refresh (6 s: inside the view's 10 s per host, with the rest)
    # no-tty: runs on the host under ssh with no terminal
    out=$(timeout 6 docker exec "$ray_container" python3 -c "$(printf %s "$ray_b64" | base64 -d)" "$ray_address" 2>&1)
    rc=$?
    printf '{"ok":%s,"text":%s}' "$([ "$rc" -eq 0 ] && echo true || echo false)" "$(printf '%s\n' "$out" | tail_json)"
}
[ -z "$ray_container" ] || exec 3< <(ray_view)

printf '{"probe":"status","node":%s,"time":%s' "$(printf '%s' "$node" | jstr)" "$(date +%s.%N | cut -c1-14)"

mem() { awk -v k="$1:" '$1 == k { print $2; found = 1; exit } END { if (!found) print 0 }' /proc/meminfo; }
printf ',"memory":{"totalKib":%s,"availableKib":%s}' "$(mem MemTotal)" "$(mem MemAvailable)"

# the model's directory, or the nearest directory above it that exists (where it would land)
p=$model_path
while [ ! -e "$p" ] && [ "$p" != / ] && [ -n "$p" ]; do p=$(dirname "$p"); done
free=$(df -B1 --output=avail "$p" 2>/dev/null | tail -n 1 | tr -dc 0-9)
printf ',"disk":{"path":%s,"freeBytes":%s}' "$(printf '%s' "$p" | jstr)" "${free:-null}"

# one JSON object per container, made by docker's own json function; the init's max-starts from its Entrypoint
# the cluster's label first after the name: which cluster a container is of is read before anything else
fmt='{"id":{{json .Id}},"name":{{json .Name}},"cluster":{{json (index .Config.Labels "'"$cluster_label"'")}},"role":{{json (index .Config.Labels "'"$role_label"'")}},'
fmt+='"rank":{{json (index .Config.Labels "'"$rank_label"'")}},"state":{{json .State.Status}},'
fmt+='"startedAt":{{json .State.StartedAt}},"finishedAt":{{json .State.FinishedAt}},"exitCode":{{json .State.ExitCode}},'
fmt+='"oomKilled":{{json .State.OOMKilled}},"restartCount":{{json .RestartCount}},'
fmt+='"initArgs":[{{range .Config.Entrypoint}}{{if eq (printf "%.11s" .) "max-starts="}}{{json .}},{{end}}{{end}}null]}'
containers='' err='' objs=''
if ! ids=$(docker ps -aq --no-trunc --filter "label=$stack_label=$stack" 2>&1); then
    err=$ids
elif [ -n "$ids" ]; then
    # shellcheck disable=SC2086 # one word per container ID
    objs=$(docker inspect --format "$fmt" $ids 2>&1) || case "$objs" in '{"id":'*) ;; *) err=$objs ;; esac
fi
if [ -n "$err" ]; then
    printf ',"docker":{"ok":false,"error":%s}' "$(printf '%s\n' "$err" | tail_json)"
else
    printf ',"docker":{"ok":true}'
fi
# a container removed between ps and inspect is missing from the list: what inspect found is kept
while IFS= read -r obj; do
    case "$obj" in '{"id":'*) ;; *) continue ;; esac
    # the stack's containers of this cluster only (cluster= empty: those without the label, the stack program's)
    case "$obj" in *'","cluster":'"$(printf '%s' "$cluster" | jstr)"',"role":'* | *'","cluster":null,"role":'*) ;; *) continue ;; esac
    [ -n "$cluster" ] && case "$obj" in *'","cluster":null,"role":'*) continue ;; esac
    name=$(printf '%s' "$obj" | sed -n 's/^{"id":"[0-9a-f]*","name":"\/\([A-Za-z0-9_.-]*\)".*/\1/p')
    extra=',"initStarts":null,"initStatus":null,"initWatchdog":null'
    [ -z "$name" ] || extra=",\"initStarts\":$(file_json "$init_dir/$name.starts"),\"initStatus\":$(file_json "$init_dir/$name.status"),\"initWatchdog\":$(file_json "$init_dir/$name.watchdog")"
    containers+="${containers:+,}${obj%\}}$extra}"
done <<<"$objs"
printf ',"containers":[%s]' "$containers"

if [ -n "$port" ]; then
    scheme=http
    # over loopback on the head itself: the certificate names the address clients use, not 127.0.0.1
    [ "$tls" = yes ] && scheme=https && curl() { command curl --insecure "$@"; }
    if out=$(curl -sS --fail --max-time 3 "$scheme://127.0.0.1:$port/metrics" 2>&1); then
        # vLLM's own lines, bounded; not the Python and process collectors', nor the _created stamps
        text=$(printf '%s\n' "$out" | grep '^vllm:' | grep -v '^vllm:[A-Za-z0-9_:]*_created[{ ]' | head -n 2000 | cut -c1-1000 | head -c 262144 | jstr)
        printf ',"metrics":{"ok":true,"text":%s}' "$text"
    else
        printf ',"metrics":{"ok":false,"error":%s}' "$(printf '%s\n' "$out" | tail_json)"
    fi
fi
if [ -n "$ray_container" ]; then
    printf ',"ray":%s' "$(cat <&3)"
fi
printf '}\n'

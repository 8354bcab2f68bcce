#!/bin/sh
# Preflight of one host, run before anything is deployed on it: what the manual deployment found broken by hand
# (docker unreachable, the fabric IP on another interface, a port held by a stopped proxy, a wrong GPU count).
#
#   preflight.sh node=NAME login=USER@HOST state-dir=DIR fabric-interface=IF fabric-ip=IP
#                gpu-runtime=nvidia|none gpus=N [ports=P,P,... managed-label=LABEL [stack=STACK cluster=[NAME]]]
#                [ssh-peer=NODE@ADDRESS:PORT:NETWORK ...] [model-dir=DIR]
#
# With stack=, a port that a container of another stack or another cluster on this host claims (its ports label,
# running or not: its restart policy may start it again) is refused, naming that container, its stack and cluster:
# two clusters on one host need distinct ports. The label keys are the managed label's with its last part replaced
# (vllm-cluster.managed: vllm-cluster.stack, vllm-cluster.cluster, vllm-cluster.ports); cluster= is empty for the
# stack program's cluster, whose containers carry no cluster label.
#
# Each ssh-peer is a host this one may forward a chain copy (image, model) to, at the address it will dial
# (NETWORK: fabric or management, for the error): it must answer there as an sshd (its banner) within 5 s.
# It also creates the node's state directory <state-dir>/<node> with its tmp (the /tmp of every container of the
# node) and cache (their compile caches), as the login user and private to it (0700), refusing one that another
# user owns; and its init directory (each container's crash budget and verdict, kept on disk across reboots).
# Prints one JSON line of facts: {"node","arch","dockerVersion","gpusSeen","memTotalKib"}.
set -u

node='' login='' state_dir='' fabric_if='' fabric_ip='' gpu_runtime='' gpus='' ports='' managed_label='' peers='' model_dir=''
stack='' stack_given='' cluster=''
for a in "$@"; do
    case "$a" in
        node=*) node=${a#*=} ;;
        login=*) login=${a#*=} ;;
        state-dir=*) state_dir=${a#*=} ;;
        fabric-interface=*) fabric_if=${a#*=} ;;
        fabric-ip=*) fabric_ip=${a#*=} ;;
        gpu-runtime=*) gpu_runtime=${a#*=} ;;
        gpus=*) gpus=${a#*=} ;;
        ports=*) ports=$(printf '%s' "${a#*=}" | tr ',' ' ') ;;
        managed-label=*) managed_label=${a#*=} ;;
        ssh-peer=*) peers="$peers ${a#*=}" ;;
        model-dir=*) model_dir=${a#*=} ;;
        stack=*) stack=${a#*=} stack_given=1 ;;
        cluster=*) cluster=${a#*=} ;;
        *) echo "preflight: unknown argument: $a" >&2; exit 2 ;;
    esac
done
for v in node login state_dir fabric_if fabric_ip gpu_runtime gpus; do
    eval "[ -n \"\$$v\" ]" || { echo "preflight: missing argument $v" >&2; exit 2; }
done

fail() { echo "preflight failed on node $node ($login): $*" >&2; exit 1; }

# Created here, as the login user, before any container: docker would create missing bind-mount sources owned by
# root, and the API key install (run as the login user) could not write there. They hold what every container
# executes or trusts (its /tmp, where Ray keeps its session; pickled compile artifacts; the key and token files):
# owned by the login user, mode 0700, so no other local user of the host can plant or swap anything there. A
# directory someone else owns is refused, never taken over.
node_dir="$state_dir/$node"
if ! [ -L "$state_dir" ] && [ -d "$state_dir" ] && [ -n "$(find "$state_dir" -maxdepth 0 -perm -0002 ! -perm -1000)" ]; then
    fail "state dir $state_dir is writable by every user and not sticky; another user could replace $node_dir"
fi
(umask 077 && mkdir -p "$node_dir" "$node_dir/tmp" "$node_dir/cache" "$node_dir/init") ||
    fail "could not create $node_dir and its tmp, cache and init directories"
for d in "$node_dir" "$node_dir/tmp" "$node_dir/cache" "$node_dir/init"; do
    if [ -L "$d" ] || ! [ -O "$d" ]; then
        fail "$d is not a directory owned by $(id -un) (owner: $(stat -c %U "$d" 2>/dev/null)); remove it or give it to $(id -un)"
    fi
    chmod 700 "$d" || fail "could not make $d private (chmod 700)"
done
# Reboots: what the node keeps (key and token files, compile caches, the containers' crash budgets) must outlive
# one, and so must the model: a file system that a reboot empties would leave the containers nothing to start with.
on_ram() { case "$(stat -f -c %T "$1" 2>/dev/null)" in tmpfs | ramfs) return 0 ;; esac; return 1; }
if on_ram "$node_dir"; then
    fail "state dir $state_dir is on $(stat -f -c %T "$node_dir"), which a reboot empties (the key and token files, compile caches and crash budgets would be lost); set stateDir to a directory on disk"
fi
if [ -n "$model_dir" ] && [ -e "$model_dir" ] && on_ram "$model_dir"; then
    fail "model directory $model_dir is on $(stat -f -c %T "$model_dir"), which a reboot empties; set model.hostPath to a directory on disk"
fi

command -v docker >/dev/null 2>&1 || fail "docker CLI not found"
dver=$(docker version --format '{{.Server.Version}}' 2>&1) || fail "docker engine unreachable: $dver"
command -v ip >/dev/null 2>&1 || fail "ip (iproute2) not found"
addrs=$(ip -o -4 addr show dev "$fabric_if" 2>&1) || fail "fabric interface $fabric_if not found"
printf '%s\n' "$addrs" | grep -qF "inet $fabric_ip/" ||
    fail "fabric IP $fabric_ip is not on interface $fabric_if (has: $(printf '%s\n' "$addrs" | awk '{print $4}' | tr '\n' ' '))"

# No container of another stack or cluster may claim a port this node's containers will listen on.
if [ -n "$ports" ] && [ -n "$stack_given" ] && [ -n "$managed_label" ]; then
    prefix=${managed_label%.*}.
    fmt="{{.Names}}|{{.Label \"${prefix}stack\"}}|{{.Label \"${prefix}cluster\"}}|{{.Label \"${prefix}ports\"}}"
    claims=$(docker ps --all --filter "label=$managed_label=true" --format "$fmt" 2>&1) || fail "docker ps failed: $claims"
    msg=""
    while IFS='|' read -r cname cstack ccluster cports; do
        [ -n "$cname" ] || continue
        [ "$cstack" = "$stack" ] && [ "$ccluster" = "$cluster" ] && continue
        # the label is JSON (name to port): its numbers, whatever else a host wrote there
        claimed=" $(printf '%s' "$cports" | tr -c '0-9' ' ') "
        for p in $ports; do
            case "$claimed" in
                *" $p "*)
                    who=$(printf '%s' "container $cname of stack $cstack${ccluster:+, cluster $ccluster}" | LC_ALL=C tr -cd '[:print:]' | awk '{ print substr($0, 1, 200) }')
                    msg="$msg; port $p is claimed on this host by $who: two clusters on one host need distinct ports (serve.port, ray.*, native.masterPort)"
                    ;;
            esac
        done
    done <<CLAIMS
$claims
CLAIMS
    [ -z "$msg" ] || fail "${msg#; }"
fi

# No other process may hold a port this node's containers will listen on (TCP, any address). Our own listeners
# are accepted: while a project container runs on the host, a held port is taken to be ours, so preflight re-runs
# against a deployed cluster. Without ss the check is skipped with a warning.
if [ -n "$ports" ]; then
    skip="not checking that ports $ports are free"
    if ! command -v ss >/dev/null 2>&1; then
        echo "preflight warning on node $node: ss (iproute2) not found; $skip" >&2
    elif ! listening=$(ss -Hltn 2>&1); then
        echo "preflight warning on node $node: ss -Hltn failed ($listening); $skip" >&2
    else
        taken=""
        for p in $ports; do
            printf '%s\n' "$listening" | grep -Eq ":${p}[[:space:]]" && taken="$taken $p"
        done
        if [ -n "$taken" ]; then
            ours=$(docker ps --quiet --filter "label=$managed_label=true" 2>&1) || fail "docker ps failed: $ours"
            if [ -z "$ours" ]; then
                msg=""
                for p in $taken; do
                    msg="$msg; port $p is already in use on the host, not by this project (see who holds it: ss -ltnp 'sport = :$p')"
                done
                fail "${msg#; }"
            fi
        fi
    fi
fi

# A chain copy leaves this host for each peer's sshd at the address the stack chose (distribution.network). Only
# bash opens a TCP connection without extra tools; the chain's hop script needs bash anyway.
if [ -n "$peers" ]; then
    command -v bash >/dev/null 2>&1 || fail "bash not found (the chain copies run their hops in bash)"
    command -v timeout >/dev/null 2>&1 || fail "timeout (coreutils) not found"
    for p in $peers; do
        peer=${p%%@*} rest=${p#*@}
        network=${rest##*:} rest=${rest%:*}
        addr=${rest%:*} pport=${rest##*:}
        # shellcheck disable=SC2016 # the $ signs are for the inner bash
        if ! timeout 5 bash -c 'exec 3<>"/dev/tcp/$0/$1" && IFS= read -r l <&3 && case $l in SSH-*) exit 0 ;; esac; exit 1' \
            "$addr" "$pport" 2>/dev/null; then
            fail "cannot reach node $peer's sshd at $addr:$pport on the $network network (distribution.network=$network: chain copies go from node $node to node $peer there); check the link and that sshd listens on $addr, or set distribution.network"
        fi
    done
fi

if [ "$gpu_runtime" = nvidia ]; then
    command -v nvidia-smi >/dev/null 2>&1 || fail "nvidia-smi not found (gpuRuntime is nvidia)"
    seen=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU ' || true)
    [ "$seen" -eq "$gpus" ] || fail "expected $gpus GPU(s), nvidia-smi -L lists $seen"
else
    seen=$gpus
fi
mem_total=$(awk '$1 == "MemTotal:" { print $2 }' /proc/meminfo 2>/dev/null)
case "$mem_total" in '' | *[!0-9]*) fail "cannot read MemTotal from /proc/meminfo" ;; esac
printf '{"node":"%s","arch":"%s","dockerVersion":"%s","gpusSeen":%s,"memTotalKib":%s}\n' "$node" "$(uname -m)" "$dver" "$seen" "$mem_total"

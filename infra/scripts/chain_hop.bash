#!/usr/bin/env bash
# One hop of a chain copy (the program's infra/builders/chain.ts): every host in the chain runs this same script,
# its part chosen by its arguments, so nothing is quoted inside quotes and the command stays small however long
# the chain:
#
#   chain_hop.bash HOP ENDS ARG save WHAT NEXT...   runs `check`, then `save` into the next host (the source host)
#   chain_hop.bash HOP ENDS ARG load NODE NEXT...   runs `load` on the stream and, when hosts follow, forwards the
#                                                   same bytes at the same time
#
# HOP is this script base64-encoded (handed on to the next host); ENDS, base64 too, is the script that defines
# what the chain carries: the functions save (writes the stream; `$what` is the source's argument, `$d` a private
# temp dir), load (consumes it), optionally check (on the source, before any connection; its failure ends the
# copy), and load_name (how a failed load is named). ARG is their argument (`$arg`), as base64 of "x<arg>x". NEXT is, per
# following host: its node name, user@address (the address this host dials: its fabric IP by default), ssh port,
# known_hosts lines (base64) and the name those lines are filed under (the operator's address for it, `[host]:port`
# off port 22). The next host's key is checked against those lines only, under that name whichever address is
# dialled (HostKeyAlias), with the key from the forwarded agent. `tee -p` keeps feeding the rest of the
# chain if this host's load fails, and this host's load going on if the rest fails; the operator then verifies
# what every host holds. A load's own exit code comes back along the chain (model_lib.bash's REFUSED: a member refused).
set -uo pipefail
self=$1 ends=$2 arg64=$3 mode=$4 what=$5
shift 5
# ARG travels as base64 of "x<arg>x", never an empty word, and with its trailing newlines kept
arg=$(printf %s "$arg64" | base64 -d) || exit 1
arg=${arg#x} arg=${arg%x}
export arg
d=$(mktemp -d) || exit 1
trap 'rm -rf "$d"' EXIT
load_name=load
check() { :; }
eval "$(printf %s "$ends" | base64 -d)" || exit 1

forward() {
    local node=$1 dest=$2 port=$3 alias=$5
    printf %s "$4" | base64 -d >"$d/known_hosts" || exit 1
    shift 5
    # shellcheck disable=SC2016 # the $ signs are for the next host's shell
    ssh -A -F none -o "UserKnownHostsFile=$d/known_hosts" -o GlobalKnownHostsFile=/dev/null -o StrictHostKeyChecking=yes \
        -o "HostKeyAlias=$alias" -o BatchMode=yes -o ConnectTimeout=10 -p "$port" -- "$dest" \
        "bash -c 'eval \"\$(printf %s \"\$1\" | base64 -d)\"' hop $self $ends $arg64 load $node $*"
}

if [ "$mode" = save ]; then
    { check; } || exit
    save | forward "$@"
    exit
fi
if [ $# -eq 0 ]; then
    load 2>&1 | sed "s/^/[$what] /" >&2
    exit
fi
mkfifo "$d/stream" || exit 1
load <"$d/stream" >"$d/load.log" 2>&1 &
loading=$!
tee -p "$d/stream" | forward "$@"
fwd=$?
wait "$loading"
rc=$?
sed "s/^/[$what] /" "$d/load.log" >&2
if [ "$rc" -ne 0 ]; then echo "$load_name failed on node $what (exit $rc)" >&2; exit "$rc"; fi
exit "$fwd"

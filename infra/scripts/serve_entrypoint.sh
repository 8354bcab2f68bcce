#!/bin/sh
# The serve container's entrypoint (the API server: Ray backend, or rank 0 of the native one), shipped by content
# as the container's Entrypoint; the server command follows it as the container's Cmd:
#
#   serve_entrypoint.sh key-file=PATH guard-dir=TEMPLATE guard=BASE64 -- vllm serve ...
#
# Fails closed: without a readable, non-empty regular file at the key path (missing, a directory that a bind mount
# made in its place, unreadable, empty) the server is never started. The key itself is in no process's
# environment and on no command line: the guard (infra/scripts/vllm_cluster_guard.py, the BASE64 argument) reads it
# from the read-only mounted file. (vLLM copies its known variables, VLLM_API_KEY among them, to every Ray worker,
# so an exported key would sit in process environments on hosts that never serve and cross the fabric in Ray's
# RPC.) The guard's module goes to a fresh private directory made from TEMPLATE by mktemp, in the container's own
# file system: never to a fixed path under /tmp, a host directory that every container of the node shares.
key_file='' guard_dir='' guard=''
while [ $# -gt 0 ]; do
    case "$1" in
        key-file=*) key_file=${1#*=} ;;
        guard-dir=*) guard_dir=${1#*=} ;;
        guard=*) guard=${1#*=} ;;
        --) shift; break ;;
        *) echo "vllm-serve: unknown entrypoint argument: $1" >&2; exit 64 ;;
    esac
    shift
done
[ -n "$key_file" ] && [ -n "$guard_dir" ] && [ -n "$guard" ] && [ $# -gt 0 ] ||
    { echo "vllm-serve: usage: key-file=PATH guard-dir=TEMPLATE guard=BASE64 -- COMMAND..." >&2; exit 64; }

k=
if [ -f "$key_file" ] && [ -r "$key_file" ]; then k="$(cat "$key_file")"; fi
if [ -z "$k" ]; then
    echo "vllm-serve: no API key in $key_file (missing, not a file, unreadable or empty); refusing to serve without one" >&2
    exit 78
fi
unset k
# a fresh private directory (a fixed path in a shared one is where someone else plants a module first)
g=$(mktemp -d "$guard_dir" 2>/dev/null || mktemp -d) || exit 1
printf %s "$guard" | base64 -d >"$g/vllm_cluster_guard.py" || { echo "vllm-serve: cannot write the API guard to $g" >&2; exit 1; }
PYTHONPATH="$g${PYTHONPATH:+:$PYTHONPATH}" VLLM_CLUSTER_API_KEY_FILE="$key_file" exec "$@" --middleware vllm_cluster_guard.RequireKey

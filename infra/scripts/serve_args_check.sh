#!/bin/sh
# The serve command line checked by the image's own vLLM on this host, before the running server is replaced:
# infra/scripts/serve_args_check.py (the CHECK argument, base64) run in IMAGE, as the serve container would run it
# but with nothing loaded, no network, no mount and no port: a throwaway container, removed when it ends.
#
#   serve_args_check.sh node=NAME image=ID check=BASE64 < ARGV.json
#
# ARGV.json, on stdin, is the serve command as a JSON list ["vllm", "serve", MODEL, FLAG, ...]: on no command line
# here or on the operator's machine, since serve.extraArgs may hold a value from secret config. Prints the check's
# one JSON line (the image's vLLM's own output goes to stderr); exits 0 when it printed one (the verdict is in the
# line), 1 when the check could not run (the image is missing, docker failed), naming the node.
set -u
node='' image='' check=''
while [ $# -gt 0 ]; do
    case "$1" in
        node=*) node=${1#*=} ;;
        image=*) image=${1#*=} ;;
        check=*) check=${1#*=} ;;
        *) echo "serve_args_check: unknown argument: $1" >&2; exit 2 ;;
    esac
    shift
done
[ -n "$node" ] && [ -n "$image" ] && [ -n "$check" ] ||
    { echo "serve_args_check: usage: node=NAME image=ID check=BASE64 < ARGV.json" >&2; exit 2; }
py=$(printf %s "$check" | base64 -d) || { echo "serve_args_check: the check script is not base64" >&2; exit 2; }
# the check's stdout is its verdict line alone (vLLM's logs go to its stderr, which passes through to ours): never
# the two in one pipe, where docker's two streams may interleave inside a line
rc=0
out=$(docker run --rm -i --network none --entrypoint python3 "$image" -c "$py") || rc=$?
line=$(printf '%s\n' "$out" | grep '^{' | tail -n 1)
if [ "$rc" = 0 ] && [ -n "$line" ]; then
    printf '%s\n' "$line"
    exit 0
fi
echo "serve arguments check on node $node: the image's vLLM could not check them (exit $rc; its output above): $(printf '%s\n' "$out" | tail -n 5)" >&2
exit 1

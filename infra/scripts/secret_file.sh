#!/bin/sh
# A secret file on a host (the API key and TLS files on the head, the Ray token on every Ray host).
#
#   secret_file.sh install kind=KIND node=NAME dir=DIR file=PATH   the secret on stdin (never argv); prints PATH
#   secret_file.sh check   kind=KIND file=PATH                     prints the content's hash, or "missing"
#   secret_file.sh remove  file=PATH
#
# install creates files under umask 077 and moves them into place atomically. check prints the hash the program
# computes for the secret (sha256 of "vllm-cluster <kind>", a newline and the content, first 16 hex digits) and
# is read-only: what `pulumi refresh` runs.
set -eu

action=${1:-}
[ $# -gt 0 ] && shift
kind='' node='' dir='' file=''
for a in "$@"; do
    case "$a" in
        kind=*) kind=${a#*=} ;;
        node=*) node=${a#*=} ;;
        dir=*) dir=${a#*=} ;;
        file=*) file=${a#*=} ;;
        *) echo "secret_file: unknown argument: $a" >&2; exit 2 ;;
    esac
done
need() {
    for v in "$@"; do
        eval "[ -n \"\$$v\" ]" || { echo "secret_file $action: missing argument $v" >&2; exit 2; }
    done
}

case "$action" in
    install)
        need kind node dir file
        umask 077
        mkdir -p "$dir"
        tmp="$dir/.$(printf '%s' "$kind" | tr ' ' '-').$$"
        # A bind mount of a missing file makes an empty directory in its place; mv would then move the secret
        # into it. Remove such a directory; refuse anything else that is not a regular file.
        if [ -d "$file" ]; then
            rmdir "$file" 2>/dev/null || { echo "$kind install on node $node: $file is a non-empty directory; remove it" >&2; exit 1; }
        fi
        cat >"$tmp"
        if [ ! -s "$tmp" ]; then
            rm -f "$tmp"
            echo "$kind install on node $node: empty $kind on stdin" >&2
            exit 1
        fi
        chmod 600 "$tmp"
        mv -f "$tmp" "$file"
        echo "$file"
        ;;
    check)
        need kind file
        if [ ! -f "$file" ] || [ ! -s "$file" ] || [ ! -r "$file" ]; then
            echo missing
            exit 0
        fi
        { printf '%s\n' "vllm-cluster $kind"; cat "$file"; } | sha256sum | cut -c1-16
        ;;
    remove)
        need file
        rm -f "$file"
        ;;
    *)
        echo "secret_file: unknown action ${action:-(none)}; expected install, check or remove" >&2
        exit 2
        ;;
esac

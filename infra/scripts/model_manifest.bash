#!/usr/bin/env bash
# shellcheck disable=SC2154 # landed is set by landed_dir (model_lib.bash, shipped in front of this script)
# A host's manifest of its model directory (model_lib.bash in front):
#
#   model_manifest.bash dir=PATH [landed=yes]
#
# Prints a first line `present <total bytes>`, then one `sha256  path` line per regular file under PATH (links
# followed: a Hugging Face cache keeps the weights behind links into blobs/), in the order the parallel hashers
# finish; or the single line `absent` when there is no such directory. A link whose target is missing (with
# `find -L`, `-type l` matches only those) fails it with exit 3, naming every such link, and so does a link that
# leads outside the directory: the file behind it cannot be checked or must not be sent. With landed=yes (the
# manifest after a copy), files hashed as they landed and not touched since (same stamp) take that hash, and the
# records are removed; every other manifest hashes every file.
set -uo pipefail

p='' landed_only=no
for a in "$@"; do
    case "$a" in
        dir=*) p=${a#*=} ;;
        landed=*) landed_only=${a#*=} ;;
        *) echo "model_manifest: unknown argument: $a" >&2; exit 2 ;;
    esac
done
[ -n "$p" ] || { echo "model_manifest: missing argument dir" >&2; exit 2; }

if [ ! -d "$p" ]; then echo absent; exit 0; fi
cd "$p" || exit 1
broken=$(find -L . -type l -printf '%P\n') || exit 1
if [ -n "$broken" ]; then
    while IFS= read -r l; do echo "broken symbolic link $p/$l (its target is missing)" >&2; done <<<"$broken"
    exit 3
fi
outside_links "$p" 3
bytes=$(find -L . -type f -printf '%s\n' | awk '{ s += $1 } END { printf "%d", s }') || exit 1
echo "present $bytes"

# every core hashes (a 100 GB model is minutes on one), one file per sha256sum so each line is one atomic write into
# the shared pipe; the program puts the lines in path order
if [ "$landed_only" != yes ]; then
    find -L . -type f -printf '%P\0' | on_every_core sha256sum --
    exit
fi
landed_dir . || exit 1
declare -A sums=()
for r in "$landed"/s*/r.*; do
    [ -f "$r" ] || continue
    { IFS= read -r -d '' k && IFS= read -r -d '' v && sums[$k]=$v; } <"$r"
done
rm -rf "$landed"
# the files without a record that still matches, NUL-separated, for the hashers
todo=$(mktemp) || exit 1
trap 'rm -f "$todo"' EXIT
find -L . -type f -printf "$FILE_STAMP\0" | while IFS= read -r -d '' e; do
    if [ -n "${sums[$e]+set}" ]; then printf '%s\n' "${sums[$e]}"; else printf '%s\0' "${e#* ./}" >>"$todo"; fi
done || exit 1
on_every_core sha256sum -- <"$todo"

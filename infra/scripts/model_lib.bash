# shellcheck shell=bash
# Functions of the model scripts (model_manifest.bash, model_ends.bash), shipped in front of them.

# A file's identity and times as `find -L` prints them (device, inode, size, modification and change time in
# nanoseconds, then its path from the model directory, `./` first): equal strings mean the file was not written,
# replaced or touched in between.
export FILE_STAMP='%D:%i:%s:%T@:%C@ %p'

# Runs the command that follows once per NUL-separated argument from stdin, as many at once as there are cores.
on_every_core() { xargs -0r -n 1 -P "$(nproc)" "$@"; }

# landed_dir DIR: sets `landed` to the directory where a member keeps the hashes of files it unpacked into the
# model directory DIR: in the user's cache, named after DIR's device and inode, so it belongs to that directory on
# that host.
landed_dir() {
    local id
    id=$(stat -L -c %d-%i "$1") || return 1
    landed="${XDG_CACHE_HOME:-$HOME/.cache}/vllm-cluster/landed/$id"
}

# One file that tar has closed (run in the model directory: landed_hash_one LANDED PATH): its stamp, its sha256sum
# line and its stamp again; when both stamps agree, a record `stamp NUL line NUL` in a file of its own under LANDED.
# Names tar prints escaped (with a backslash) are left to the manifest. Never fails.
landed_hash_one() {
    local f=$2 s h r
    case $f in *\\*) return 0 ;; esac
    s=$(find -L "./$f" -maxdepth 0 -type f -printf "$FILE_STAMP") && [ -n "$s" ] || return 0
    h=$(sha256sum -- "$f") || return 0
    [ "$(find -L "./$f" -maxdepth 0 -type f -printf "$FILE_STAMP")" = "$s" ] || return 0
    r=$(mktemp "$1/r.XXXXXX") && printf '%s\0%s\0' "$s" "$h" >"$r"
}
export -f landed_hash_one

# What a member runs while tar unpacks (tar -v prints each file's name as it starts on it, so a name's successor,
# or the end of the list, means tar has closed that file): landed_hash_one for each finished file, on every core.
# Never fails the load: a file without a record is hashed by the manifest after the copy.
landed_hashing() {
    {
        local prev='' n
        while IFS= read -r n; do
            if [ -n "$prev" ]; then printf '%s\0' "$prev"; fi
            prev=$n
        done
        if [ -n "$prev" ]; then printf '%s\0' "$prev"; fi
    } | on_every_core bash -c 'landed_hash_one "$@"' landed "$landed" || true
}

# outside_links WHERE CODE (run in the model directory): one line per symbolic link (reached from it, links
# followed) whose target lies outside it, then exit CODE: links are followed when hashing and packing, so such a
# link would copy a file from elsewhere on the source (a key, a password file) to every host. In a Hugging Face
# cache snapshot (`.../snapshots/<rev>`) the links into the repository's `blobs/` are its own files and allowed.
# WHERE is the directory as the message names it.
outside_links() {
    local where=$1 code=$2 root blobs outside=0 f t
    root=$(pwd -P) || exit 1
    blobs="$root"
    if [ "$(basename "$(dirname "$root")")" = snapshots ]; then blobs="$(dirname "$(dirname "$root")")/blobs"; fi
    while IFS= read -r -d '' f; do
        [ -L "$f" ] || continue
        t=$(realpath -e -- "$f") || continue
        case "$t/" in
            "$root"/* | "$blobs"/*) ;;
            *)
                echo "symbolic link $where/${f#./} leads outside the model directory (to $t)" >&2
                outside=1
                ;;
        esac
    done < <(find -L . -mindepth 1 -print0)
    [ "$outside" = 0 ] || exit "$code"
}

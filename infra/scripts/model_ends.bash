# shellcheck shell=bash
# What the model chain carries (chain_hop.bash ENDS, model_lib.bash in front): `$arg` is "K/N", a newline, then the
# model directory: this chain is stream K (from 0) of N parallel ones, each carrying its share of the files.
# save FILES on the source (FILES: the paths, NUL-separated, base64, or `all`) packs its share of them (share_of)
# with links followed, hard links too, so every member is a regular file; load unpacks into the directory on each
# host, owned by the login user with its umask's modes whatever owners and modes (set-user-ID bits included) the
# source's files carry, hashing each file as it lands. The source refuses before any connection when the directory
# is missing, holds no file, a broken link or a link that leads outside it.
#
# A member host takes regular files only, each under the model directory by a name without `.`, `..` or empty parts,
# through directories that are real directories, never links (land_member in model_lib.bash: tar only lists the
# stream and hands over each regular file's bytes). A symbolic link, a hard link, a device, a name outside the
# directory, or a link already in the directory where a member's path goes is refused, naming the node, the stream
# and the member; a link already at a member's own name is replaced by the file. Refusals exit 3 (REFUSED), which
# the chain passes back to the operator whatever the manifests say afterwards.
# shellcheck disable=SC2034,SC2154 # load_name is read and arg, what and d are set by chain_hop.bash
load_name="unpacking the model"
share=${arg%%$'\n'*} arg=${arg#*$'\n'}
case $share in [0-9]*/[0-9]*) ;; *) echo "model chain: bad stream share '$share'" >&2; exit 2 ;; esac

# share_of LIST (NUL-separated paths under the model directory): this stream's part of them. Largest first, each
# file goes to the stream with the fewest bytes so far; every stream computes the same split from the same list.
share_of() {
    local k=${share%/*} n=${share#*/} i min s f
    if [ "$n" -le 1 ]; then cat "$1"; return; fi
    local -a bytes=()
    for ((i = 0; i < n; i++)); do bytes[i]=0; done
    (cd "$arg" && xargs -0r stat -L --printf '%s %n\0' -- <"$1") | LC_ALL=C sort -z -k1,1nr -k2 |
        while IFS= read -r -d '' e; do
            s=${e%% *} f=${e#* } min=0
            for ((i = 1; i < n; i++)); do if ((bytes[i] < bytes[min])); then min=$i; fi; done
            bytes[min]=$((bytes[min] + s))
            if ((min == k)); then printf '%s\0' "$f"; fi
        done
}

check() {
    [ -d "$arg" ] || { echo "no model directory on the source" >&2; exit 2; }
    [ -z "$(find -L "$arg" -type l -print -quit)" ] || { echo "broken symbolic link under the model directory" >&2; exit 3; }
    [ -n "$(find -L "$arg" -type f -print -quit)" ] || { echo "no file under the model directory" >&2; exit 2; }
    (cd "$arg" && outside_links "$arg" 3)
}

save() {
    {
        if [ "$what" = all ]; then (cd "$arg" && find -L . -type f -printf '%P\0'); else printf %s "$what" | base64 -d; fi
    } >"$d/files" && share_of "$d/files" >"$d/mine" && tar -C "$arg" -chf - --hard-dereference --null -T "$d/mine"
}

load() {
    local k=${share%/*} n=${share#*/} rc
    mkdir -p "$arg" || return 1
    # the directory as it is now, links resolved once: every member lands under this real path
    LAND_ROOT=$(cd -P -- "$arg" && pwd -P) || return 1
    LAND_WHERE="node $what, stream $((k + 1)) of $n" LAND_REFUSALS=$d/refused
    export LAND_ROOT LAND_WHERE LAND_REFUSALS
    landed_dir "$arg" || return 1
    # each stream keeps its records apart (the streams land at once); without a place for them (no writable
    # cache), the check after the copy hashes every file
    landed="$landed/s$k"
    # shellcheck disable=SC2174 # only the records' own directories are private; their parents are the user's cache
    if rm -rf "$landed" && mkdir -p -m 700 "${landed%/*}" "$landed"; then
        land_stream "$d/listing" | (cd "$arg" && landed_hashing)
        rc=${PIPESTATUS[0]}
    else
        land_stream "$d/listing" >/dev/null
        rc=$?
    fi
    refuse_other_members "$d/listing"
    if [ -s "$LAND_REFUSALS" ]; then return "$REFUSED"; fi
    return "$rc"
}

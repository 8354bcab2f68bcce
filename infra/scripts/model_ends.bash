# shellcheck shell=bash
# What the model chain carries (chain_hop.bash ENDS, model_lib.bash in front): `$arg` is the model directory.
# save FILES on the source (FILES: the paths, NUL-separated, base64, or `all`) packs them with links followed; load
# unpacks into the directory on each host, owned by the login user with its umask's modes whatever owners and
# modes (set-user-ID bits included) the source's files carry, hashing each file as it lands. The source refuses
# before any connection when the directory is missing, holds no file, a broken link or a link that leads outside it.
# shellcheck disable=SC2034,SC2154 # load_name is read and arg, what and d are set by chain_hop.bash
load_name="unpacking the model"

check() {
    [ -d "$arg" ] || { echo "no model directory on the source" >&2; exit 2; }
    [ -z "$(find -L "$arg" -type l -print -quit)" ] || { echo "broken symbolic link under the model directory" >&2; exit 3; }
    [ -n "$(find -L "$arg" -type f -print -quit)" ] || { echo "no file under the model directory" >&2; exit 2; }
    (cd "$arg" && outside_links "$arg" 3)
}

save() {
    {
        if [ "$what" = all ]; then (cd "$arg" && find -L . -type f -printf '%P\0'); else printf %s "$what" | base64 -d; fi
    } >"$d/files" && tar -C "$arg" -chf - --null -T "$d/files"
}

load() {
    mkdir -p "$arg" || return 1
    landed_dir "$arg" || return 1
    # without a place for the records (no writable cache), the check after the copy hashes every file
    # shellcheck disable=SC2174 # only the records' own directory is private; its parents are the user's cache
    if rm -rf "$landed" && mkdir -p -m 700 "$landed"; then
        tar -C "$arg" --no-same-owner --no-same-permissions -xvf - | (cd "$arg" && landed_hashing)
    else
        tar -C "$arg" --no-same-owner --no-same-permissions -xf -
    fi
}

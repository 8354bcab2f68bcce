# shellcheck shell=bash
# What the image chain carries (chain_hop.bash ENDS): `docker save REF` on the source, `docker load` on each host.
# ARG: the layer DiffIDs to hold back, comma-separated (every receiving host holds them already), or empty for the
# whole image. Held-back layers are left out of the stream by image_layers.py (its text in $image_layers_py), which
# spools each layer in this hop's private directory to recognise it by its digest.
# shellcheck disable=SC2034,SC2154 # load_name is read and what, arg, d and image_layers_py are set by chain_hop.bash
load_name="docker load"
check() {
    [ -z "$arg" ] || command -v python3 >/dev/null || {
        echo "the source host has no python3, which is needed to send only the layers the other hosts lack (or set distribution.imageLayers: all)" >&2
        return 1
    }
}
save() {
    if [ -z "$arg" ]; then
        docker save "$what"
        return
    fi
    docker save "$what" | python3 -c "$image_layers_py" "$arg" "$d"
}
# Docker 28 on the containerd image store: `docker load` exits 0 and keeps an image that it could not unpack (a layer
# that fails its DiffID, or whose blob and snapshot are both missing), and no container can start from it. Such an
# image is removed again, so the host lacks it and the copy fails naming why.
load() {
    local out rc=0 img
    out=$(docker load 2>&1) || rc=$?
    printf '%s\n' "$out"
    case "$out" in
    *"Error unpacking image"*)
        printf '%s\n' "$out" | sed -n 's/^Loaded image: //p; s/^Loaded image ID: //p' | while read -r img; do
            docker image rm "$img" >/dev/null 2>&1 && echo "removed $img: Docker could not unpack it"
        done
        return 1
        ;;
    esac
    return "$rc"
}

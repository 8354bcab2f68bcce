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
load() { docker load; }

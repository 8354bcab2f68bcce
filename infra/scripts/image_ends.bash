# shellcheck shell=bash
# What the image chain carries (chain_hop.bash ENDS): `docker save REF` on the source, `docker load` on each host.
# shellcheck disable=SC2034,SC2154 # load_name is read and what is set by chain_hop.bash
load_name="docker load"
save() { docker save "$what"; }
load() { docker load; }

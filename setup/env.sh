# shellcheck shell=bash
# Source this file (`source setup/env.sh`) to put the project's Pulumi toolchain on PATH and set the offline
# Pulumi settings. It runs setup/toolchain.sh, which builds missing pieces once into the user cache and
# takes seconds afterwards. Same as: eval "$(bash setup/toolchain.sh --print-env)"
_vcl_toolchain_env="$(bash "$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/toolchain.sh" --print-env)"
_vcl_toolchain_rc=$?
eval "$_vcl_toolchain_env"
unset _vcl_toolchain_env
# shellcheck disable=SC2317 # return when sourced, exit when run
return "$_vcl_toolchain_rc" 2>/dev/null || exit "$_vcl_toolchain_rc"

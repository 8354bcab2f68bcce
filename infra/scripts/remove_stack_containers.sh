#!/bin/sh
# Removes every container of one stack from the host it runs on (the Roster's eviction of a host leaving the
# stack): the containers carrying the label LABEL=STACK, nothing else.
#
#   remove_stack_containers.sh label=LABEL stack=STACK
set -u
label='' stack=''
for a in "$@"; do
    case "$a" in
        label=*) label=${a#*=} ;;
        stack=*) stack=${a#*=} ;;
        *) echo "remove_stack_containers: unknown argument: $a" >&2; exit 2 ;;
    esac
done
[ -n "$label" ] && [ -n "$stack" ] || { echo "remove_stack_containers: label= and stack= are required" >&2; exit 2; }
ids=$(docker ps -aq --filter "label=$label=$stack") || exit 1
[ -z "$ids" ] && exit 0
# shellcheck disable=SC2086 # one word per container ID
docker rm -f $ids >/dev/null

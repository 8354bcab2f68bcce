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

# One file that has landed (run in the model directory: landed_hash_one LANDED PATH): its stamp, its sha256sum line
# and its stamp again; when both stamps agree, a record `stamp NUL line NUL` in a file of its own under LANDED.
# Never fails.
landed_hash_one() {
    local f=$2 s h r
    s=$(find -L "./$f" -maxdepth 0 -type f -printf "$FILE_STAMP") && [ -n "$s" ] || return 0
    h=$(sha256sum -- "$f") || return 0
    [ "$(find -L "./$f" -maxdepth 0 -type f -printf "$FILE_STAMP")" = "$s" ] || return 0
    r=$(mktemp "$1/r.XXXXXX") && printf '%s\0%s\0' "$s" "$h" >"$r"
}
export -f landed_hash_one

# What a member runs while the stream lands: the NUL-separated names of the files land_member has put in place, on
# stdin, each hashed by landed_hash_one, on every core. Never fails the load: a file without a record is hashed by
# the manifest after the copy.
landed_hashing() {
    on_every_core bash -c 'landed_hash_one "$@"' landed "$landed" || true
}

# The exit code of a load that refused a member (and of the chain that carried it).
export REFUSED=3

# refuse MEMBER WHY: the refusal, naming the node and stream (LAND_WHERE) and the member (printf %q: a name may hold
# a line break), on stderr and in LAND_REFUSALS, by which the load exits REFUSED.
refuse() {
    printf 'model chain: %s: member %q refused: %s\n' "$LAND_WHERE" "$1" "$2" | tee -a "$LAND_REFUSALS" >&2
}

# land_member (tar's --to-command, in a new bash, once per regular file with its bytes on stdin and its name in
# TAR_FILENAME): writes the file under LAND_ROOT, a directory at a time, each a real directory (made when missing,
# never a link), into a new file in its directory, then renamed over the member's name (a link there is replaced,
# never followed); prints the name NUL-terminated for the hashers. Refuses (exit REFUSED) a name that is absolute,
# empty or has a `.`, `..` or empty part, and a path through a link already in the directory.
land_member() {
    local name=$TAR_FILENAME rel=. rest part dir tmp to
    case $name in
        '') refuse "$name" "an empty name"; cat >/dev/null; return "$REFUSED" ;;
        /*) refuse "$name" "an absolute name: it would land outside the model directory"; cat >/dev/null; return "$REFUSED" ;;
    esac
    case /$name/ in
        */../* | */./* | *//*)
            refuse "$name" "a name with a '..', '.' or empty part: only plain paths under the model directory are unpacked"
            cat >/dev/null
            return "$REFUSED"
            ;;
    esac
    rest=$name
    while [[ $rest == */* ]]; do
        part=${rest%%/*} rest=${rest#*/} rel=$rel/$part
        dir=$LAND_ROOT/${rel#./}
        if [ -L "$dir" ]; then
            to=$(readlink -- "$dir")
            refuse "$name" "$(printf %q "${rel#./}") is already in the model directory as a symbolic link (to $(printf %q "$to")), which it would be written through; remove it ($(printf %q "$dir")) and copy again"
            cat >/dev/null
            return "$REFUSED"
        fi
        [ -d "$dir" ] || mkdir -- "$dir" 2>/dev/null || [ -d "$dir" ] || { echo "model chain: $LAND_WHERE: cannot make directory $(printf %q "$dir")" >&2; cat >/dev/null; return 1; }
    done
    dir=$LAND_ROOT${rel#.}
    # from here on this shell stands in the real directory: a link swapped in on the way afterwards changes nothing
    if ! cd -P -- "$dir" || [ "$(pwd -P)" != "$dir" ]; then
        refuse "$name" "the way to it under the model directory is not a real directory (a link appeared on it)"
        cat >/dev/null
        return "$REFUSED"
    fi
    tmp=$(mktemp -p . .vllm-cluster-landing.XXXXXX) || { cat >/dev/null; return 1; }
    if ! cat >"$tmp"; then rm -f -- "$tmp"; return 1; fi
    # the source's permission bits through the login user's umask, never set-user-ID and the like; the source's time
    # (tar run as root clears its umask for its children: the umask the load started with is in LAND_UMASK)
    chmod "$(printf %o $((8#${TAR_MODE:-644} & 8#777 & ~8#${LAND_UMASK:-022})))" -- "$tmp" &&
        touch -m -d "@${TAR_MTIME%%.*}" -- "$tmp" 2>/dev/null
    mv -f -T -- "$tmp" "$rest" || { rm -f -- "$tmp"; return 1; }
    printf '%s\0' "$name"
}

# tar runs its --to-command with /bin/sh, and dash drops the functions bash exports in its environment: land_member
# travels as text in an ordinary variable instead.
LAND_LIB=$(declare -f refuse land_member)
export LAND_LIB

# land_stream LISTING: unpacks the tar stream on stdin under LAND_ROOT with land_member for each regular file (tar
# writes nothing itself: names are taken as they are, `-P`, so land_member judges them), prints the landed names,
# and keeps tar's long listing of every member in LISTING for refuse_other_members.
land_stream() {
    LAND_UMASK=$(umask) && export LAND_UMASK
    # shellcheck disable=SC2016 # expanded by the bash that tar starts for each file
    tar -x -P -vv --index-file="$1" --to-command='bash -c '\''eval "$LAND_LIB" && land_member'\''' -f -
}

# refuse_other_members LISTING: names each member of the stream that is neither a regular file nor a directory (a
# symbolic or hard link, a device), as tar lists it: tar handed land_member regular files only, so none was written.
refuse_other_members() {
    local mode _owner _size _date _time member why
    while read -r mode _owner _size _date _time member; do
        case $mode in
            -* | d*) continue ;;
            l*) why="a symbolic link" ;;
            h*) why="a hard link" ;;
            *) why="not a regular file (type ${mode:0:1})" ;;
        esac
        printf 'model chain: %s: member %s refused: %s: only regular files are unpacked\n' "$LAND_WHERE" "$member" "$why" |
            tee -a "$LAND_REFUSALS" >&2
    done <"$1"
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

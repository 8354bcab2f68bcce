/**
 * Model distribution as a chain (./chain.ts): the source host packs the model files some host lacks with `tar`,
 * and each host that needs them unpacks the stream into the model directory while forwarding it to the next one.
 *
 * What a host holds is judged by its manifest: every regular file under the model directory, symbolic links
 * followed (a Hugging Face cache keeps the weights behind links into blobs/), as `sha256  path` lines sorted by
 * path. Hosts whose manifest equals the source's are left out; the others get only the files that at least one of
 * them lacks or holds with other content, so a copy cut short is resumed file by file. Files a host holds that the
 * source does not are left in place: nothing is ever deleted. They still make that host's manifest differ, and the
 * verification names them, since vLLM may load stray weight files it finds in the directory.
 *
 * Each member hashes the files it unpacks as they land, from its disk, each once tar has closed it, while the next
 * ones arrive (landedHashing); the manifest read after the copy takes those hashes for files whose identity and
 * times (device, inode, size, modification and change time) are still what they were when hashed, and hashes the
 * rest. So the verification after the copy still lists the whole directory from disk, and waits only for the hash
 * of the last file to land instead of hashing the model again.
 */
import { createHash } from "crypto";
import { ChainHop, chainAgentScript, hopScript, hopSsh } from "./chain";
import { shellQuote } from "./quote";
import { SshTarget, USER_CACHE_DIR, remoteScriptCommand } from "./ssh";

/** The first line a manifest script prints when the model directory is not there. */
const ABSENT = "absent";

/** Base64 characters of the file list one chain copy carries: it is an argument of the hop's ssh command line. */
export const FILE_LIST_MAX_CHARS = 64 * 1024;

/** Runs the command that follows once per NUL-separated argument from stdin, as many at once as there are cores. */
const ON_EVERY_CORE = 'xargs -0r -n 1 -P "$(nproc)"';

/** How many differing paths an error names per host. */
const PATHS_SHOWN = 5;

/**
 * A file's identity and times as `find -L` prints them (device, inode, size, modification and change time in
 * nanoseconds, then its path from the model directory, `./` first): equal strings mean the file was not written,
 * replaced or touched in between.
 */
export const FILE_STAMP = "%D:%i:%s:%T@:%C@ %p";

/**
 * Shell lines that set `landed` to the directory where a member keeps the hashes of files it unpacked into the model
 * directory `dir` (shell syntax): in the user's cache, named after the model directory's device and inode, so it
 * belongs to that directory on that host. `fail` is what runs when the directory cannot be looked at.
 */
function landedDirLines(dir: string, fail: string): string[] {
    return [`landed_id=$(stat -L -c %d-%i ${dir}) || ${fail}`, `landed="${USER_CACHE_DIR}/landed/$landed_id"`];
}

/**
 * What a member runs while tar unpacks (tar -v prints each file's name as it starts on it, so a name's successor, or
 * the end of the list, means tar has closed that file): for each finished file, its stamp, its sha256sum line, and
 * its stamp again; when both stamps agree, a record `stamp NUL line NUL` in a file of its own under `$landed`. Names
 * tar prints escaped (with a backslash) are left to the manifest. Never fails the load: a file without a record is
 * hashed by the manifest after the copy.
 */
function landedHashing(): string {
    const one = [
        "f=$2",
        "case $f in *\\\\*) exit 0 ;; esac",
        `s=$(find -L "./$f" -maxdepth 0 -type f -printf '${FILE_STAMP}') && [ -n "$s" ] || exit 0`,
        'h=$(sha256sum -- "$f") || exit 0',
        `[ "$(find -L "./$f" -maxdepth 0 -type f -printf '${FILE_STAMP}')" = "$s" ] || exit 0`,
        'r=$(mktemp "$1/r.XXXXXX") && printf \'%s\\0%s\\0\' "$s" "$h" >"$r"',
    ].join("; ");
    return [
        "{ prev=; while IFS= read -r n; do",
        '  if [ -n "$prev" ]; then printf \'%s\\0\' "$prev"; fi; prev=$n;',
        'done; if [ -n "$prev" ]; then printf \'%s\\0\' "$prev"; fi; }',
        `| ${ON_EVERY_CORE} bash -c ${shellQuote(one)} landed "$landed"`,
        "|| true",
    ].join(" ");
}

/**
 * Shell lines, run in the model directory, that print one line per symbolic link (reached from it, links followed)
 * whose target lies outside it, then exit `code`: links are followed when hashing and packing, so such a link would
 * copy a file from elsewhere on the source (a key, a password file) to every host. In a Hugging Face cache snapshot
 * (`.../snapshots/<rev>`) the links into the repository's `blobs/` are its own files and allowed. `where` is the
 * directory as the message names it.
 */
function outsideLinksLines(where: string, code: number): string[] {
    return [
        "root=$(pwd -P) || exit 1",
        'blobs="$root"',
        'if [ "$(basename "$(dirname "$root")")" = snapshots ]; then blobs="$(dirname "$(dirname "$root")")/blobs"; fi',
        "outside=0",
        "while IFS= read -r -d '' f; do",
        '  [ -L "$f" ] || continue',
        '  t=$(realpath -e -- "$f") || continue',
        '  case "$t/" in "$root"/* | "$blobs"/*) ;; *)',
        `    echo "symbolic link ${where}/\${f#./} leads outside the model directory (to $t)" >&2; outside=1 ;;`,
        "  esac",
        "done < <(find -L . -mindepth 1 -print0)",
        `[ "$outside" = 0 ] || exit ${code}`,
    ];
}

/**
 * The script that prints a host's manifest of `hostPath`: a first line `present <total bytes>`, then the manifest,
 * or the single line `absent` when there is no such directory. A link whose target is missing (with `find -L`,
 * `-type l` matches only those) fails it, naming every such link: the file behind it cannot be checked or sent.
 * With `landed` (the manifest after a copy), files hashed as they landed and not touched since (same stamp) take
 * that hash, and the records are removed; every other manifest hashes every file.
 */
export function modelManifestScript(hostPath: string, landed = false): string {
    // every core hashes (a 100 GB model is minutes on one), one file per sha256sum so each line is one atomic write
    // into the shared pipe; parseManifest puts the lines in path order
    const hashAll = `find -L . -type f -printf '%P\\0' | ${ON_EVERY_CORE} sha256sum --`;
    const hashUnrecorded = [
        ...landedDirLines(".", "exit 1"),
        "declare -A sums=()",
        'for r in "$landed"/r.*; do',
        '  [ -f "$r" ] || continue',
        "  { IFS= read -r -d '' k && IFS= read -r -d '' v && sums[$k]=$v; } <\"$r\"",
        "done",
        'rm -rf "$landed"',
        // the files without a record that still matches, NUL-separated, for the hashers
        "todo=$(mktemp) || exit 1",
        "trap 'rm -f \"$todo\"' EXIT",
        `find -L . -type f -printf '${FILE_STAMP}\\0' | while IFS= read -r -d '' e; do`,
        '  if [ -n "${sums[$e]+set}" ]; then printf \'%s\\n\' "${sums[$e]}"; else printf \'%s\\0\' "${e#* ./}" >>"$todo"; fi',
        "done || exit 1",
        `${ON_EVERY_CORE} sha256sum -- <"$todo"`,
    ];
    return [
        "set -uo pipefail",
        `p=${shellQuote(hostPath)}`,
        `if [ ! -d "$p" ]; then echo ${ABSENT}; exit 0; fi`,
        'cd "$p" || exit 1',
        "broken=$(find -L . -type l -printf '%P\\n') || exit 1",
        'if [ -n "$broken" ]; then',
        '  while IFS= read -r l; do echo "broken symbolic link $p/$l (its target is missing)" >&2; done <<<"$broken"',
        "  exit 3",
        "fi",
        ...outsideLinksLines("$p", 3),
        "bytes=$(find -L . -type f -printf '%s\\n' | awk '{ s += $1 } END { printf \"%d\", s }') || exit 1",
        'echo "present $bytes"',
        ...(landed ? hashUnrecorded : [hashAll]),
    ].join("\n");
}

/** The local command line that prints `node`'s manifest of `hostPath` over ssh (`landed`: see modelManifestScript). */
export function modelManifestCommand(t: SshTarget, node: string, hostPath: string, landed = false): string {
    const what = `model manifest of ${hostPath} on node ${node}`;
    return remoteScriptCommand(t, what, modelManifestScript(hostPath, landed), "bash");
}

/** One host's manifest of the model directory. */
export interface Manifest {
    present: boolean;
    /** Total size of the files (links followed). */
    bytes: number;
    /** The `sha256  path` lines as sha256sum prints them, in path order; empty for an empty or absent directory. */
    text: string;
    /** sha256 by path, in manifest order. */
    files: Map<string, string>;
}

/** sha256sum starts a line with `\` when the name has a backslash or line break in it, which it then escapes. */
function unescapeName(name: string): string {
    return name.replace(/\\(.)/g, (_, c: string) => (c === "n" ? "\n" : c === "r" ? "\r" : c));
}

/** Reads what modelManifestScript printed; throws on anything else (the caller names the host). */
export function parseManifest(stdout: string): Manifest {
    const [head, ...lines] = stdout.split("\n");
    if (head === ABSENT) {
        return { present: false, bytes: 0, text: "", files: new Map() };
    }
    const size = /^present (\d+)$/.exec(head);
    if (!size) {
        throw new Error(`unexpected manifest output: ${JSON.stringify(stdout.slice(0, 200))}`);
    }
    const entries = lines
        .filter((l) => l !== "")
        .map((line) => {
            const m = /^(\\?)([0-9a-f]{64}) [ *](.*)$/.exec(line);
            if (!m) {
                throw new Error(`unexpected manifest line: ${JSON.stringify(line)}`);
            }
            return { line, path: m[1] ? unescapeName(m[3]) : m[3], sum: m[2] };
        })
        // the hashes arrive in the order the parallel hashers finish: byte order of the paths (as `LC_ALL=C sort`)
        .sort((a, b) => Buffer.compare(Buffer.from(a.path), Buffer.from(b.path)));
    const text = entries.map((e) => `${e.line}\n`).join("");
    return { present: true, bytes: Number(size[1]), text, files: new Map(entries.map((e) => [e.path, e.sum])) };
}

/** The model's content checksum on a host: sha256 of its manifest; empty when the directory is absent. */
export function manifestDigest(m: Manifest): string {
    return m.present ? `sha256:${createHash("sha256").update(m.text).digest("hex")}` : "";
}

/** The source's paths that `member` lacks or holds with other content. */
function wrongOn(source: Manifest, member: Manifest): string[] {
    return [...source.files].filter(([p, sum]) => member.files.get(p) !== sum).map(([p]) => p);
}

/** The source's files that at least one member lacks or holds with other content, in manifest order. */
export function filesToSend(source: Manifest, members: Manifest[]): string[] {
    const wanted = new Set(members.flatMap((m) => wrongOn(source, m)));
    return [...source.files.keys()].filter((p) => wanted.has(p));
}

/** What makes a member's manifest differ from the source's, path by path (the first few, then how many more). */
export function manifestDifferences(source: Manifest, member: Manifest): string {
    const diffs = [
        ...wrongOn(source, member).map((p) => `${p} (${member.files.has(p) ? "other content" : "missing"})`),
        ...[...member.files.keys()].filter((p) => !source.files.has(p)).map((p) => `${p} (not on the source, left in place)`),
    ];
    const more = diffs.length > PATHS_SHOWN ? `, and ${diffs.length - PATHS_SHOWN} more` : "";
    return diffs.slice(0, PATHS_SHOWN).join(", ") + more;
}

/** `files` in runs whose list fits in one command line (FILE_LIST_MAX_CHARS once encoded). */
export function fileBatches(files: string[]): string[][] {
    const batches: string[][] = [];
    let size = 0;
    for (const f of files) {
        const chars = Math.ceil((Buffer.byteLength(f) + 1) / 3) * 4;
        if (batches.length === 0 || size + chars > FILE_LIST_MAX_CHARS) {
            batches.push([]);
            size = 0;
        }
        batches[batches.length - 1].push(f);
        size += chars;
    }
    return batches;
}

/**
 * How members unpack: files owned by the login user with its umask's modes, whatever owners and modes (set-user-ID
 * bits included) the source's files carry.
 */
const UNPACK = "--no-same-owner --no-same-permissions";

/** The `save` argument that sends every file of the source's directory, listed when the stream starts. */
export const ALL_FILES = "all";

/**
 * The hop script of the model chain, the directory written into it: `save FILES` on the source (FILES: the paths,
 * NUL-separated, base64, or ALL_FILES) packs them with links followed, `load NODE` unpacks into the directory on each
 * host (UNPACK). The source refuses before any connection when the directory is missing, holds no file, a broken
 * link or a link that leads outside it (outsideLinksLines).
 */
export function modelHopScript(hostPath: string): string {
    const p = shellQuote(hostPath);
    const list = `if [ "$what" = ${ALL_FILES} ]; then (cd ${p} && find -L . -type f -printf '%P\\0'); else printf %s "$what" | base64 -d; fi`;
    return hopScript({
        check: [
            `[ -d ${p} ] || { echo "no model directory on the source" >&2; exit 2; }`,
            `[ -z "$(find -L ${p} -type l -print -quit)" ] || { echo "broken symbolic link under the model directory" >&2; exit 3; }`,
            `[ -n "$(find -L ${p} -type f -print -quit)" ] || { echo "no file under the model directory" >&2; exit 2; }`,
            `(cd ${p} && {\n${outsideLinksLines(p, 3).join("\n")}\n})`,
        ].join("; "),
        save: `{ ${list}; } >"$d/files" && tar -C ${p} -chf - --null -T "$d/files"`,
        load: [
            `mkdir -p ${p} || return 1`,
            ...landedDirLines(p, "return 1"),
            // without a place for the records (no writable cache), the check after the copy hashes every file
            'if rm -rf "$landed" && mkdir -p -m 700 "$landed"; then',
            `  tar -C ${p} ${UNPACK} -xvf - | (cd ${p} && ${landedHashing()})`,
            "else",
            `  tar -C ${p} ${UNPACK} -xf -`,
            "fi",
        ].join("\n"),
        loadName: "unpacking the model",
    });
}

/**
 * The operator's bash script for one chain copy of `files` (paths under `hostPath`, or ALL_FILES) from the source
 * host to `hops` in order. Exits non-zero when any link fails; the caller then compares every host's manifest with
 * the source's.
 */
export function modelChainCopyScript(
    source: SshTarget,
    hostPath: string,
    files: string[] | typeof ALL_FILES,
    hops: ChainHop[],
    key: SshTarget,
): string {
    if (hops.length === 0 || files.length === 0) {
        throw new Error("modelChainCopyScript: no hop or no file");
    }
    const list = files === ALL_FILES ? ALL_FILES : Buffer.from(files.map((f) => `${f}\0`).join("")).toString("base64");
    const path = [source, ...hops.map((h) => h.target)];
    const agent = chainAgentScript(key, path, "the model chain needs a key without a passphrase");
    return [...agent, hopSsh(source, modelHopScript(hostPath), ["save", list], hops)].join("\n");
}

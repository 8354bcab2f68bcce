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
import { ChainEnds, ChainHop, chainAgentScript, chainEnds, hopSsh } from "./chain";
import { RemoteStep, remoteStepCommand } from "./remoteStep";
import type { SshTarget } from "./ssh";

/**
 * The exit code of a chain copy that a host refused (model_lib.bash's REFUSED): a member that is not a regular file,
 * a name outside the model directory, a link in the way on a member host, or a link on the source that leads outside.
 * It fails the copy whatever the manifests say afterwards: the stream was not what the source sends.
 */
export const CHAIN_REFUSED = 3;

/** The first line a manifest script prints when the model directory is not there. */
const ABSENT = "absent";

/** Base64 characters of the file list one chain copy carries: it is an argument of the hop's ssh command line. */
export const FILE_LIST_MAX_CHARS = 64 * 1024;

/** How many differing paths an error names per host. */
const PATHS_SHOWN = 5;

/**
 * A file's identity and times as `find -L` prints them (device, inode, size, modification and change time in
 * nanoseconds, then its path from the model directory, `./` first): model_lib.bash's FILE_STAMP, by which the
 * check after a copy trusts a hash made as the file landed.
 */
export const FILE_STAMP = "%D:%i:%s:%T@:%C@ %p";

/**
 * The step that prints a host's manifest of `hostPath` (infra/scripts/model_manifest.bash): a first line `present
 * <total bytes>`, then the manifest, or the single line `absent`. `landed`: the manifest after a copy, which takes
 * the hashes made as the files landed for files not touched since.
 */
export function modelManifestStep(node: string, hostPath: string, landed = false): RemoteStep {
    return {
        what: `model manifest of ${hostPath} on node ${node}`,
        script: "model_manifest.bash",
        libs: ["model_lib.bash"],
        args: [`dir=${hostPath}`, ...(landed ? ["landed=yes"] : [])],
    };
}

/** The local command line that prints `node`'s manifest of `hostPath` over ssh (`landed`: see modelManifestStep). */
export function modelManifestCommand(t: SshTarget, node: string, hostPath: string, landed = false): string {
    return remoteStepCommand(t, modelManifestStep(node, hostPath, landed));
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

/** Reads what the manifest step printed; throws on anything else (the caller names the host). */
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

/** The `save` argument that sends every file of the source's directory, listed when the stream starts. */
export const ALL_FILES = "all";

/** One of the parallel streams a model copy runs along the chain: stream `index` (from 0) of `count`. */
export interface StreamShare {
    index: number;
    count: number;
}

/** A copy in one stream. */
export const ONE_STREAM: StreamShare = { index: 0, count: 1 };

/**
 * The ends of the model chain (infra/scripts/model_ends.bash, model_lib.bash in front); their argument is the stream's
 * share and the directory: `save FILES` on the source (FILES: the paths, NUL-separated, base64, or ALL_FILES) packs
 * this stream's share of them with links followed (the largest files first, each to the stream with the fewest bytes
 * so far, the same split in every stream), `load NODE` unpacks into the directory on each host, owned by the login
 * user whatever the source's owners and modes. The source refuses before any connection when the directory is
 * missing, holds no file, a broken link or a link that leads outside it.
 */
export function modelEnds(hostPath: string, share: StreamShare = ONE_STREAM): ChainEnds {
    return chainEnds(["model_lib.bash", "model_ends.bash"], `${share.index}/${share.count}\n${hostPath}`);
}

/**
 * The operator's bash script for one chain copy of `files` (paths under `hostPath`, or ALL_FILES) from the source
 * host to `hops` in order, as stream `share` (its part of the files). Exits non-zero when any link fails; the caller
 * then compares every host's manifest with the source's.
 */
export function modelChainCopyScript(
    source: SshTarget,
    hostPath: string,
    files: string[] | typeof ALL_FILES,
    hops: ChainHop[],
    key: SshTarget,
    share: StreamShare = ONE_STREAM,
): string {
    if (hops.length === 0 || files.length === 0) {
        throw new Error("modelChainCopyScript: no hop or no file");
    }
    const list = files === ALL_FILES ? ALL_FILES : Buffer.from(files.map((f) => `${f}\0`).join("")).toString("base64");
    const path = [source, ...hops.map((h) => h.target)];
    const agent = chainAgentScript(key, path, "the model chain needs a key without a passphrase");
    return [...agent, hopSsh(source, modelEnds(hostPath, share), ["save", list], hops)].join("\n");
}

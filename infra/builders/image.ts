/** Making an image present on a host: streamed from another host or the local engine, or pulled. */
import { createHash } from "crypto";
import { shellJoin, shellQuote } from "./quote";
import { SshTarget, sshCommand } from "./ssh";

/** Where the image comes from: another host (ssh), the operator's local engine, or a registry pull. */
/** Where the image comes from, for the ensure scripts (source=host: the source node reached over ssh). */
export function imageOrigin(
    source: "host" | "local" | "registry",
    sourceNode: string | undefined,
    nodes: { name: string; ssh: SshTarget }[],
): ImageOrigin {
    if (source !== "host") {
        return { kind: source };
    }
    const src = nodes.find((n) => n.name === sourceNode);
    if (!src) {
        throw new Error(`image source node ${JSON.stringify(sourceNode)} is not one of the nodes`);
    }
    return { kind: "host", node: src.name, target: src.ssh };
}

export type ImageOrigin = { kind: "host"; node: string; target: SshTarget } | { kind: "local" } | { kind: "registry" };

/** `docker ARGS` on the target; `bulk` for `docker save` and `load`, whose stream gets a connection of its own. */
export function dockerOn(t: SshTarget | "local", args: readonly string[], bulk = false): string {
    return t === "local" ? shellJoin(["docker", ...args]) : sshCommand(t, ["docker", ...args], !bulk);
}

/** The fields of an image's config that change how its containers run (compared as they are, empty or absent alike). */
const RUN_CONFIG_FIELDS = ["Env", "Cmd", "Entrypoint", "WorkingDir", "User", "Labels"] as const;

/**
 * `docker image inspect --format` for an image's facts: its ID, then what it is on any engine's image store: its
 * layer DiffIDs in order, its platform and its run config. `index` reads fields that one engine's API leaves out
 * and another renders empty, and `with` prints both as nothing. An image on the containerd store whose content is
 * incomplete (a layer's blob missing) has no layers there: its facts say `null`, never the source's.
 */
export const IMAGE_FACTS_FORMAT =
    `{{.Id}} {{with index . "RootFS"}}{{json (index . "Layers")}}{{else}}null{{end}} {{.Architecture}}/{{.Os}}` +
    `{{with index . "Config"}}${RUN_CONFIG_FIELDS.map((f) => ` ${f}={{with index . "${f}"}}{{json .}}{{end}}`).join("")}{{end}}`;

/** The image's layer DiffIDs, bottom first (`docker image inspect`'s RootFS.Layers). */
export const LAYERS_FORMAT = "{{json .RootFS.Layers}}";

/**
 * Whether Docker of this server version (`docker version`'s) saves the OCI layout, each layer a blob named by its
 * digest (25 and later), rather than `<id>/layer.tar` files. An unknown version counts as the older layout.
 */
export function savesOciLayout(serverVersion: string): boolean {
    const major = /^v?(\d+)\./.exec(serverVersion.trim());
    return major !== null && Number(major[1]) >= 25;
}

/** The engine's storage, from `docker info --format`: the containerd image store names its snapshotter here. */
export const DRIVER_STATUS_FORMAT = "{{json .DriverStatus}}";

/** Whether `docker info`'s DriverStatus (DRIVER_STATUS_FORMAT) is the containerd image store's. */
export function isContainerdStore(driverStatus: string): boolean {
    return driverStatus.includes("io.containerd.snapshotter");
}

/**
 * An image as one host holds it, the line the inspect scripts print: `<ID> <store> <content>`. The ID is what the
 * engine calls the image (containers are made from it). On the classic store it is the config digest; on the
 * containerd image store it is a manifest digest, so the same image has other IDs there, and `docker save | docker
 * load` does not make them equal. content is the sha256 of the image's layer DiffIDs in order, its platform and its
 * run config (IMAGE_FACTS_FORMAT), the same on either store.
 */
export interface ImageFacts {
    id: string;
    store: "classic" | "containerd";
    content: string;
}

export function parseImageFacts(line: string | undefined): ImageFacts | undefined {
    const [id, store, content, ...rest] = (line ?? "").trim().split(/\s+/);
    if (!id?.startsWith("sha256:") || (store !== "classic" && store !== "containerd") || !content || rest.length > 0) {
        return undefined;
    }
    return { id, store, content };
}

/**
 * Whether two hosts hold the same image: by config digest where both stores report it (both classic: the IDs are
 * config digests, exact as before), otherwise by layer DiffIDs, platform and run config. Absent is never the same.
 */
export function sameImage(a: string | undefined, b: string | undefined): boolean {
    const x = parseImageFacts(a);
    const y = parseImageFacts(b);
    if (!x || !y || x.content !== y.content) {
        return false;
    }
    return x.store === "classic" && y.store === "classic" ? x.id === y.id : true;
}

/** bash: the same rule as sameImage, on two facts lines. */
const SAME_FUNCTION = [
    "same() {",
    '    [ -n "$1" ] && [ -n "$2" ] || return 1',
    "    local a b",
    '    read -r -a a <<<"$1"',
    '    read -r -a b <<<"$2"',
    '    [ "${a[2]}" = "${b[2]}" ] || return 1',
    '    if [ "${a[1]}" = classic ] && [ "${b[1]}" = classic ]; then [ "${a[0]}" = "${b[0]}" ]; fi',
    "}",
].join("\n");

/**
 * bash: a function `name` that prints the facts line of `ref` where `t` is (an ssh target or the operator's engine),
 * prints nothing when the image is absent, and fails naming `where` when the engine cannot be asked.
 */
function factsFunction(name: string, t: SshTarget | "local", ref: string, where: string): string {
    const inspect = dockerOn(t, ["image", "inspect", "--format", IMAGE_FACTS_FORMAT, ref]);
    const info = dockerOn(t, ["info", "--format", DRIVER_STATUS_FORMAT]);
    // stdout only is the answer: ssh may say things on stderr (a busy control socket) that are no part of it; on a
    // failure the command runs again to say why
    return [
        `${name}() {`,
        "    local out info store",
        `    if ! out=$(${inspect} 2>/dev/null) || ! info=$(${info} 2>/dev/null); then`,
        `        out=$({ ${inspect} && ${info}; } 2>&1 >/dev/null)`,
        `        case "$out" in *"No such image"*|*"no such image"*) return 0;; esac`,
        `        echo ${shellQuote(`inspecting ${ref} on ${where} failed:`)}" $out" >&2; return 1`,
        "    fi",
        '    case "$info" in *io.containerd.snapshotter*) store=containerd;; *) store=classic;; esac',
        `    printf '%s %s sha256:%s\\n' "\${out%% *}" "$store" "$(printf %s "\${out#* }" | { sha256sum 2>/dev/null || shasum -a 256; } | cut -c1-64)"`,
        "}",
    ].join("\n");
}

/** Prints the facts line of `ref` on the target (ImageFacts), or nothing when the image is absent (read/refresh). */
export function imageInspectScript(t: SshTarget | "local", ref: string): string {
    const where = t === "local" ? "the local docker engine" : `${t.user}@${t.host}`;
    return ["set -uo pipefail", factsFunction("facts", t, ref, where), "facts"].join("\n");
}

/**
 * bash script that makes `ref` present on `dst` and prints its facts line (ImageFacts) as the last stdout line.
 * host/local origin: skip when dst already holds the source's image (sameImage), else stream
 * `docker save REF | ssh dst docker load` (no temporary file) and verify that dst now holds the source's image.
 * registry origin: `docker pull` on dst. If EXPECTED_IMAGE (a facts line) is set in the environment, the result
 * must be that image; if HOST_ARCH is set (uname -m of dst), the image architecture must fit it.
 */
export function imageEnsureScript(origin: ImageOrigin, dst: SshTarget, dstNode: string, ref: string): string {
    const q = shellQuote;
    const lines = [
        "set -euo pipefail",
        `fail() { echo "image ${ref} on node ${dstNode}: $*" >&2; exit 1; }`,
        SAME_FUNCTION,
        factsFunction("dst_facts", dst, ref, `node ${dstNode}`),
        `have=$(dst_facts) || fail "cannot inspect the host's images"`,
    ];
    if (origin.kind === "registry") {
        lines.push(
            `${dockerOn(dst, ["pull", ref])} >&2 || fail "docker pull failed"`,
            `have=$(dst_facts) || fail "cannot inspect the host's images"`,
            `[ -n "$have" ] || fail "not present after pull"`,
        );
    } else {
        const src: SshTarget | "local" = origin.kind === "host" ? origin.target : "local";
        const srcName = origin.kind === "host" ? `node ${origin.node}` : "the local docker engine";
        lines.push(
            factsFunction("src_facts", src, ref, srcName),
            `want=$(src_facts) || fail ${q(`cannot inspect the source image on ${srcName}`)}`,
            `[ -n "$want" ] || fail ${q(`source image not present on ${srcName}`)}`,
            `if ! same "$have" "$want"; then`,
            `  echo ${q(`streaming ${ref} from ${srcName} to node ${dstNode}`)} >&2`,
            `  loaded=$(${dockerOn(src, ["save", ref], true)} | ${dockerOn(dst, ["load"], true)} 2>&1) || { printf '%s\\n' "$loaded" >&2; fail ${q(`docker save | docker load from ${srcName} failed`)}; }`,
            `  printf '%s\\n' "$loaded" >&2`,
            // the containerd store's load exits 0 keeping an image it could not unpack, from which no container starts
            `  case "$loaded" in *"Error unpacking image"*) ${dockerOn(dst, ["image", "rm", ref])} >/dev/null 2>&1; fail "Docker could not unpack the image it loaded (removed it again)";; esac`,
            `  have=$(dst_facts) || fail "cannot inspect the host's images"`,
            `  [ -n "$have" ] || fail "not present after docker load"`,
            `  same "$have" "$want" || fail "holds $have after docker load, not the source's image $want"`,
            `fi`,
        );
    }
    lines.push(
        `if [ -n "\${EXPECTED_IMAGE:-}" ] && ! same "$have" "$EXPECTED_IMAGE"; then fail "holds $have, not the source's image $EXPECTED_IMAGE"; fi`,
        // An amd64 image on an aarch64 host (GB10) would only fail later, inside ray start.
        `if [ -n "\${HOST_ARCH:-}" ]; then`,
        `  iarch=$(${dockerOn(dst, ["image", "inspect", "--format", "{{.Architecture}}", ref])}) || fail "cannot read image architecture"`,
        `  case "$HOST_ARCH/$iarch" in aarch64/arm64|arm64/arm64|x86_64/amd64|amd64/amd64) ;; *) fail "image architecture $iarch does not match host architecture $HOST_ARCH";; esac`,
        `fi`,
        `printf '%s\\n' "$have"`,
    );
    return lines.join("\n");
}

/**
 * The chain IDs of a layer list (OCI image spec): the first is the first DiffID, each next one the sha256 of the
 * one before, a space and the next DiffID. A host holds a layer where it holds its chain ID: the same content on
 * the same layers below it, which is what `docker load` looks up before it opens a layer's file.
 */
export function chainIds(diffIds: readonly string[]): string[] {
    const out: string[] = [];
    for (const d of diffIds) {
        const prev = out[out.length - 1];
        out.push(prev === undefined ? d : `sha256:${createHash("sha256").update(`${prev} ${d}`).digest("hex")}`);
    }
    return out;
}

/**
 * The DiffIDs of `source`'s layers that need not travel: every receiving host (its images' layer lists in `held`)
 * already holds each place where the layer occurs. A DiffID that occurs twice is sent when either place is missing
 * somewhere, since a stream carries a file once for every place.
 */
export function layersToHoldBack(source: readonly string[], held: readonly (readonly (readonly string[])[])[]): string[] {
    const want = chainIds(source);
    const hosts = held.map((images) => new Set(images.flatMap((layers) => chainIds(layers))));
    const needed = new Set(source.filter((_, i) => hosts.some((h) => !h.has(want[i]))));
    return [...new Set(source.filter((d) => !needed.has(d)))];
}

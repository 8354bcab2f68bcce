/** Making an image present on a host: streamed from another host or the local engine, or pulled. */
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

function inspectIdArgs(ref: string): string[] {
    return ["image", "inspect", "--format", "{{.Id}}", ref];
}

/** Prints the image ID of `ref` on the target, or nothing when the image is absent (read/refresh). */
export function imageInspectScript(t: SshTarget, ref: string): string {
    return [
        "set -uo pipefail",
        `out=$(${dockerOn(t, inspectIdArgs(ref))} 2>&1)`,
        `rc=$?`,
        `if [ "$rc" -eq 0 ]; then printf '%s\\n' "$out"; exit 0; fi`,
        `case "$out" in *"No such image"*|*"no such image"*) exit 0;; esac`,
        `echo ${shellQuote(`inspecting ${ref} on ${t.user}@${t.host} failed:`)}" $out" >&2`,
        `exit "$rc"`,
    ].join("\n");
}

/**
 * bash script that makes `ref` present on `dst` and prints its image ID as the last stdout line.
 * host/local origin: skip when dst already holds the source's ID, else stream
 * `docker save REF | ssh dst docker load` (no temporary file) and verify the loaded ID equals the source ID.
 * registry origin: `docker pull` on dst. If EXPECTED_ID is set in the environment, the result must match it;
 * if HOST_ARCH is set (uname -m of dst), the image architecture must fit it.
 */
export function imageEnsureScript(origin: ImageOrigin, dst: SshTarget, dstNode: string, ref: string): string {
    const q = shellQuote;
    const lines = [
        "set -euo pipefail",
        `fail() { echo "image ${ref} on node ${dstNode}: $*" >&2; exit 1; }`,
        `have=$(${dockerOn(dst, inspectIdArgs(ref))} 2>/dev/null || true)`,
    ];
    if (origin.kind === "registry") {
        lines.push(
            `${dockerOn(dst, ["pull", ref])} >&2 || fail "docker pull failed"`,
            `have=$(${dockerOn(dst, inspectIdArgs(ref))}) || fail "not present after pull"`,
        );
    } else {
        const src: SshTarget | "local" = origin.kind === "host" ? origin.target : "local";
        const srcName = origin.kind === "host" ? `node ${origin.node}` : "the local docker engine";
        lines.push(
            `want=$(${dockerOn(src, inspectIdArgs(ref))} 2>/dev/null) || fail ${q(`source image not present on ${srcName}`)}`,
            `if [ "$have" != "$want" ]; then`,
            `  echo ${q(`streaming ${ref} from ${srcName} to node ${dstNode}`)} >&2`,
            `  ${dockerOn(src, ["save", ref], true)} | ${dockerOn(dst, ["load"], true)} >&2 || fail ${q(`docker save | docker load from ${srcName} failed`)}`,
            `  have=$(${dockerOn(dst, inspectIdArgs(ref))}) || fail "not present after docker load"`,
            `  [ "$have" = "$want" ] || fail "loaded ID $have differs from source ID $want"`,
            `fi`,
        );
    }
    lines.push(
        `if [ -n "\${EXPECTED_ID:-}" ] && [ "$have" != "$EXPECTED_ID" ]; then fail "has ID $have, expected $EXPECTED_ID"; fi`,
        // An amd64 image on an aarch64 host (GB10) would only fail later, inside ray start.
        `if [ -n "\${HOST_ARCH:-}" ]; then`,
        `  iarch=$(${dockerOn(dst, ["image", "inspect", "--format", "{{.Architecture}}", ref])}) || fail "cannot read image architecture"`,
        `  case "$HOST_ARCH/$iarch" in aarch64/arm64|arm64/arm64|x86_64/amd64|amd64/amd64) ;; *) fail "image architecture $iarch does not match host architecture $HOST_ARCH";; esac`,
        `fi`,
        `printf '%s\\n' "$have"`,
    );
    return lines.join("\n");
}
/** The image's layer DiffIDs, bottom first (`docker image inspect`'s RootFS.Layers). */
export const LAYERS_FORMAT = "{{json .RootFS.Layers}}";

/** The engine's storage, from `docker info --format`: the containerd image store names its snapshotter here. */
export const DRIVER_STATUS_FORMAT = "{{json .DriverStatus}}";

/** Whether `docker info`'s DriverStatus (DRIVER_STATUS_FORMAT) is the containerd image store's. */
export function isContainerdStore(driverStatus: string): boolean {
    return driverStatus.includes("io.containerd.snapshotter");
}

/**
 * The chain IDs of a layer list (OCI image spec): the first is the first DiffID, each next one the sha256 of the
 * one before, a space and the next DiffID. A host holds a layer where it holds its chain ID: the same content on
 * the same layers below it, which is what `docker load` looks up before it opens a layer's file.
 */
export function chainIds(diffIds: readonly string[]): string[] {
    // eslint-disable-next-line @typescript-eslint/no-require-imports
    const { createHash } = require("crypto") as typeof import("crypto");
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

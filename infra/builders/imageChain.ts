/**
 * Image distribution as a chain (./chain.ts): the source streams `docker save` to the first host that needs the
 * image, which loads it and forwards the same bytes to the next one while it loads, and so on. With the image on a
 * host, no image byte passes through the operator; with it on the operator's engine, the operator feeds the chain.
 */
import { ChainEnds, ChainHop, chainAgentScript, chainEnds, hopSsh } from "./chain";
import { shellJoin, shellQuote } from "./quote";
import { base64, scriptFile } from "./remoteStep";
import type { SshTarget } from "./ssh";

/** Where the chain starts: a host holding the image, or the operator's own engine. */
export type ChainSource = { kind: "host"; node: string; target: SshTarget } | { kind: "local" };

/**
 * The ends of the image chain (infra/scripts/image_ends.bash): `save REF` on the source host, `load NODE` on each
 * host that lacks it. Their argument: the DiffIDs the source holds back (layersToHoldBack), comma-separated; empty
 * sends the whole image. The layer filter (infra/scripts/image_layers.py) then travels with them, as `$image_layers_py`.
 */
export function imageEnds(holdBack: readonly string[] = []): ChainEnds {
    const ends = chainEnds(["image_ends.bash"], holdBack.join(","));
    if (holdBack.length === 0) {
        return ends;
    }
    const filter = `image_layers_py=$(printf %s ${base64(scriptFile("image_layers.py").text)} | base64 -d) || exit 1\n`;
    return { ...ends, script: filter + ends.script };
}

/**
 * The operator's bash script for one chain copy of `ref` to `hops` (in order): starts a private ssh-agent holding
 * only the configured key, usable only along the chain's links (it dies with the script), then runs the chain from the source host, or from the local
 * engine into the first hop. Exits non-zero when any link fails; the caller then inspects which hosts hold the image.
 */
export function chainCopyScript(
    source: ChainSource,
    ref: string,
    hops: ChainHop[],
    key: SshTarget,
    holdBack: readonly string[] = [],
): string {
    if (hops.length === 0) {
        throw new Error("chainCopyScript: no hop");
    }
    const path = [...(source.kind === "host" ? [source.target] : []), ...hops.map((h) => h.target)];
    const agent = chainAgentScript(key, path, "a key with a passphrase needs image.distribution=relay");
    if (source.kind === "host") {
        return [...agent, hopSsh(source.target, imageEnds(holdBack), ["save", ref], hops)].join("\n");
    }
    const [first, ...rest] = hops;
    const ssh = hopSsh(first.target, imageEnds(), ["load", first.node], rest);
    const save = shellJoin(["docker", "save", ref]);
    const filter =
        holdBack.length > 0 ? ` | python3 ${shellQuote(scriptFile("image_layers.py").file)} ${shellQuote(holdBack.join(","))}` : "";
    return [...agent, `${save}${filter} | ${ssh}`].join("\n");
}

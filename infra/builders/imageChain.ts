/**
 * Image distribution as a chain (./chain.ts): the source streams `docker save` to the first host that needs the
 * image, which loads it and forwards the same bytes to the next one while it loads, and so on. With the image on a
 * host, no image byte passes through the operator; with it on the operator's engine, the operator feeds the chain.
 */
import { ChainHop, chainAgentScript, chainEnds, hopSsh } from "./chain";
import { shellJoin } from "./quote";
import type { SshTarget } from "./ssh";

/** Where the chain starts: a host holding the image, or the operator's own engine. */
export type ChainSource = { kind: "host"; node: string; target: SshTarget } | { kind: "local" };

/** The ends of the image chain (infra/scripts/image_ends.bash): `save REF` on the source host, `load NODE` on each host that lacks it. */
export const IMAGE_ENDS = chainEnds(["image_ends.bash"]);

/**
 * The operator's bash script for one chain copy of `ref` to `hops` (in order): starts a private ssh-agent holding
 * only the configured key, usable only along the chain's links (it dies with the script), then runs the chain from the source host, or from the local
 * engine into the first hop. Exits non-zero when any link fails; the caller then inspects which hosts hold the image.
 */
export function chainCopyScript(source: ChainSource, ref: string, hops: ChainHop[], key: SshTarget): string {
    if (hops.length === 0) {
        throw new Error("chainCopyScript: no hop");
    }
    const path = [...(source.kind === "host" ? [source.target] : []), ...hops.map((h) => h.target)];
    const agent = chainAgentScript(key, path, "a key with a passphrase needs image.distribution=relay");
    if (source.kind === "host") {
        return [...agent, hopSsh(source.target, IMAGE_ENDS, ["save", ref], hops)].join("\n");
    }
    const [first, ...rest] = hops;
    const ssh = hopSsh(first.target, IMAGE_ENDS, ["load", first.node], rest);
    return [...agent, `${shellJoin(["docker", "save", ref])} | ${ssh}`].join("\n");
}

import * as pulumi from "@pulumi/pulumi";
import { imageInspectScript } from "../builders/image";
import { ChainSource, chainCopyScript } from "../builders/imageChain";
import { shellJoin } from "../builders/quote";
import type { SshTarget } from "../builders/ssh";
import { lastLine, runBash, tail } from "./bash";
import { ChainMember, chainDiff, hopsOf } from "./chain";

/** Inputs of an ImageChain: data only; the provider builds its scripts with the pure builders at run time. */
export interface ImageChainInputs {
    ref: pulumi.Input<string>;
    source: pulumi.Input<ChainSource>;
    /** The hosts to fill, in chain order (the source host is not one of them). */
    members: pulumi.Input<ChainMember[]>;
}

interface State {
    ref: string;
    source: ChainSource;
    members: ChainMember[];
    /** Image ID on the source, and on each member as last seen (empty when absent). */
    sourceId?: string;
    imageIds?: Record<string, string>;
    /** Members the last create/update streamed the image to. */
    copied?: string[];
}

function sourceName(s: ChainSource): string {
    return s.kind === "host" ? `node ${s.node}` : "the local docker engine";
}

async function inspect(target: SshTarget | "local", ref: string, where: string): Promise<string> {
    const script =
        target === "local"
            ? `${shellJoin(["docker", "image", "inspect", "--format", "{{.Id}}", ref])} 2>/dev/null || true`
            : imageInspectScript(target, ref);
    const r = await runBash(script);
    if (r.code !== 0) {
        throw new Error(`inspecting ${ref} on ${where} failed (exit ${r.code}):\n${tail(r.stderr)}`);
    }
    return lastLine(r.stdout);
}

async function observe(s: State): Promise<{ sourceId: string; imageIds: Record<string, string> }> {
    const src = s.source.kind === "host" ? s.source.target : "local";
    const [sourceId, ...ids] = await Promise.all([
        inspect(src, s.ref, sourceName(s.source)),
        ...s.members.map((m) => inspect(m.target, s.ref, `node ${m.node}`)),
    ]);
    return { sourceId, imageIds: Object.fromEntries(s.members.map((m, i) => [m.node, ids[i]])) };
}

/** Streams the image along the chain of members that lack it; fails naming every member still without it. */
async function converge(s: State): Promise<State> {
    const seen = await observe(s);
    if (!seen.sourceId.startsWith("sha256:")) {
        throw new Error(`image ${s.ref}: source image not present on ${sourceName(s.source)}`);
    }
    const needy = s.members.filter((m) => seen.imageIds[m.node] !== seen.sourceId);
    if (needy.length === 0) {
        return { ...s, ...seen, copied: [] };
    }
    const r = await runBash(chainCopyScript(s.source, s.ref, await hopsOf(needy), needy[0].target));
    // only the hosts streamed to are looked at again (one ssh each)
    const now = await Promise.all(needy.map((m) => inspect(m.target, s.ref, `node ${m.node}`)));
    const after = { sourceId: seen.sourceId, imageIds: { ...seen.imageIds, ...Object.fromEntries(needy.map((m, i) => [m.node, now[i]])) } };
    const missing = needy.filter((m) => after.imageIds[m.node] !== after.sourceId).map((m) => m.node);
    if (missing.length > 0) {
        throw new Error(
            `image ${s.ref} from ${sourceName(s.source)}: not on node ${missing.join(", ")} after the chain copy ` +
                `(exit ${r.code}):\n${tail(r.stderr)}`,
        );
    }
    return { ...s, ...after, copied: needy.map((m) => m.node) };
}

/**
 * The image on every member host, copied along one chain (../builders/imageChain.ts). read re-inspects the source
 * and every member, so `pulumi refresh` notices a removed image; diff then reports a change, update streams to the
 * hosts without it only, and the per-host ImagePresence updates that follow name them in the preview. delete leaves
 * the images (see ImagePresence).
 */
export const imageChainProvider: pulumi.dynamic.ResourceProvider = {
    async check(_olds: State, news: State) {
        return { inputs: news };
    },

    async diff(_id: string, olds: State, news: State) {
        return chainDiff(olds, news, ["ref", "source", "members"], { source: olds.sourceId, members: olds.imageIds });
    },

    async create(inputs: State) {
        const outs = await converge(inputs);
        return { id: `${inputs.ref}@chain`, outs };
    },

    async update(_id: string, _olds: State, news: State) {
        return { outs: await converge(news) };
    },

    async read(id: string, props?: State) {
        if (!props) {
            throw new Error(`cannot read image chain ${id} without its recorded state`);
        }
        return { id, props: { ...props, ...(await observe(props)) } };
    },

    async delete() {
        // Leaves the images on the hosts, as ImagePresence does.
    },
};

/** One chain copy of an image to every member host (skipping those that hold it), before the per-host checks. */
export class ImageChain extends pulumi.dynamic.Resource {
    declare public readonly sourceId: pulumi.Output<string>;
    declare public readonly imageIds: pulumi.Output<Record<string, string>>;

    constructor(name: string, args: ImageChainInputs, opts?: pulumi.CustomResourceOptions) {
        super(imageChainProvider, name, { ...args, sourceId: undefined, imageIds: undefined, copied: undefined }, opts);
    }
}

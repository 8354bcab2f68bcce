import * as pulumi from "@pulumi/pulumi";
import {
    DRIVER_STATUS_FORMAT,
    LAYERS_FORMAT,
    dockerOn,
    imageInspectScript,
    isContainerdStore,
    layersToHoldBack,
    parseImageFacts,
    sameImage,
    savesOciLayout,
} from "../builders/image";
import { ChainSource, chainCopyScript } from "../builders/imageChain";
import type { SshTarget } from "../builders/ssh";
import { lastLine, runBash, tail } from "./bash";
import { ChainMember, chainDiff, hopsOf } from "./chain";

/** Inputs of an ImageChain: data only; the provider builds its scripts with the pure builders at run time. */
export interface ImageChainInputs {
    ref: pulumi.Input<string>;
    source: pulumi.Input<ChainSource>;
    /** The hosts to fill, in chain order (the source host is not one of them). */
    members: pulumi.Input<ChainMember[]>;
    /** missing: send only the layers some member lacks; all: the whole image (distribution.imageLayers). */
    layers?: pulumi.Input<"missing" | "all">;
    /** The ID image.build gave the source's image: a new build copies again (unset when nothing is built). */
    built?: pulumi.Input<string | undefined>;
}

interface State {
    ref: string;
    source: ChainSource;
    members: ChainMember[];
    layers?: "missing" | "all";
    built?: string;
    /** Image ID on the source, and on each member as last seen (empty when absent). */
    sourceId?: string;
    imageIds?: Record<string, string>;
    /** The same as facts lines (ImageFacts): what is compared, since one image has other IDs on other stores. */
    sourceImage?: string;
    images?: Record<string, string>;
    /** Members the last create/update streamed the image to. */
    copied?: string[];
    /** What that copy sent: "3 of 14 layers" (the others held back, every member had them), or "whole image". */
    sent?: string;
}

function sourceName(s: ChainSource): string {
    return s.kind === "host" ? `node ${s.node}` : "the local docker engine";
}

/** The facts line of `ref` where `target` is (ImageFacts), or "" when the image is absent there. */
async function inspect(target: SshTarget | "local", ref: string, where: string): Promise<string> {
    const r = await runBash(imageInspectScript(target, ref));
    if (r.code !== 0) {
        throw new Error(`inspecting ${ref} on ${where} failed (exit ${r.code}):\n${tail(r.stderr)}`);
    }
    return lastLine(r.stdout);
}

type Seen = Required<Pick<State, "sourceId" | "imageIds" | "sourceImage" | "images">>;

/** What was seen, with the IDs taken from the facts lines. */
function seenOf(sourceImage: string, images: Record<string, string>): Seen {
    const id = (line: string) => parseImageFacts(line)?.id ?? "";
    const imageIds = Object.fromEntries(Object.entries(images).map(([n, line]) => [n, id(line)]));
    return { sourceId: id(sourceImage), imageIds, sourceImage, images };
}

async function observe(s: State): Promise<Seen> {
    const src = s.source.kind === "host" ? s.source.target : "local";
    const [sourceImage, ...lines] = await Promise.all([
        inspect(src, s.ref, sourceName(s.source)),
        ...s.members.map((m) => inspect(m.target, s.ref, `node ${m.node}`)),
    ]);
    return seenOf(sourceImage, Object.fromEntries(s.members.map((m, i) => [m.node, lines[i]])));
}

/** Runs `docker ARGS` where `target` is; resolves with stdout, rejects naming `what`. */
async function docker(target: SshTarget | "local", args: string[], what: string): Promise<string> {
    const r = await runBash(dockerOn(target, args));
    if (r.code !== 0) {
        throw new Error(`${what} failed (exit ${r.code}):\n${tail(r.stderr)}`);
    }
    return r.stdout;
}

/**
 * Every layer list of every image on a member (for the layer chains it holds). An image on the containerd store whose
 * content is incomplete lists no layers, so it vouches for none.
 */
async function heldLayers(m: ChainMember): Promise<string[][]> {
    const where = `node ${m.node}`;
    const ids = [...new Set((await docker(m.target, ["image", "ls", "-aq", "--no-trunc"], `listing images on ${where}`)).split(/\s+/))];
    const present = ids.filter((i) => i !== "");
    const lists =
        present.length === 0
            ? ""
            : await docker(m.target, ["image", "inspect", "--format", LAYERS_FORMAT, ...present], `inspecting images on ${where}`);
    return lists
        .split("\n")
        .filter((l) => l.trim() !== "")
        .map((l) => (JSON.parse(l) as string[] | null) ?? []);
}

/**
 * The layers of the image that need not travel to `needy` (layersToHoldBack), with what is said of the copy. Members
 * on either store take a stream without them: the classic store's `docker load` looks each layer up by its chain ID
 * before it opens the layer's file, the containerd store's imports what the stream has and unpacks a layer only
 * where its snapshot (by chain ID) is missing (docs/engines.md).
 */
async function holdBackFor(s: State, needy: ChainMember[]): Promise<{ holdBack: string[]; sent: string }> {
    if ((s.layers ?? "missing") === "all") {
        return { holdBack: [], sent: "whole image" };
    }
    const src = s.source.kind === "host" ? s.source.target : "local";
    const out = await docker(src, ["image", "inspect", "--format", LAYERS_FORMAT, s.ref], `inspecting ${s.ref} on ${sourceName(s.source)}`);
    const layers = (JSON.parse(lastLine(out)) as string[] | null) ?? [];
    const held = await Promise.all(needy.map(heldLayers));
    const holdBack = layersToHoldBack(layers, held);
    if (holdBack.length > 0) {
        // An archive of Docker before 25 names each layer by a file (`<id>/layer.tar`): the containerd store's load
        // needs every such file to know the layer's blob ("failed to resolve layers: layer ... not found").
        const stores = await Promise.all(
            needy.map((m) => docker(m.target, ["info", "--format", DRIVER_STATUS_FORMAT], `docker info on node ${m.node}`)),
        );
        const version = stores.some(isContainerdStore)
            ? lastLine(await docker(src, ["version", "--format", "{{.Server.Version}}"], `docker version on ${sourceName(s.source)}`))
            : "";
        if (version !== "" && !savesOciLayout(version)) {
            return {
                holdBack: [],
                sent: `whole image (Docker ${version} on ${sourceName(s.source)} saves layers as files, which a containerd-store host's load cannot do without)`,
            };
        }
    }
    const kept = new Set(holdBack);
    return { holdBack, sent: `${layers.filter((d) => !kept.has(d)).length} of ${layers.length} layers` };
}

/**
 * Whether `ref` on the member lists no layers: on the containerd store, an image whose content is incomplete (a
 * layer's blob missing) is listed, runs, and shows neither layers nor platform.
 */
async function withoutLayers(m: ChainMember, ref: string): Promise<boolean> {
    const r = await runBash(dockerOn(m.target, ["image", "inspect", "--format", LAYERS_FORMAT, ref]));
    return r.code === 0 && ["null", "[]"].includes(lastLine(r.stdout).trim());
}

async function filterAsync<T>(xs: T[], pred: (x: T) => Promise<boolean>): Promise<T[]> {
    const keep = await Promise.all(xs.map(pred));
    return xs.filter((_, i) => keep[i]);
}

/** Streams the image along the chain of members that lack it; fails naming every member still without it. */
async function converge(s: State): Promise<State> {
    const seen = await observe(s);
    if (!seen.sourceId.startsWith("sha256:")) {
        throw new Error(`image ${s.ref}: source image not present on ${sourceName(s.source)}`);
    }
    const needy = s.members.filter((m) => !sameImage(seen.images[m.node], seen.sourceImage));
    if (needy.length === 0) {
        return { ...s, ...seen, copied: [], sent: "" };
    }
    const plan = await holdBackFor(s, needy);
    let r = await runBash(chainCopyScript(s.source, s.ref, await hopsOf(needy), needy[0].target, plan.holdBack));
    // only the hosts streamed to are looked at again (one ssh each)
    const look = async (ms: ChainMember[]) =>
        Object.fromEntries(await Promise.all(ms.map(async (m) => [m.node, await inspect(m.target, s.ref, `node ${m.node}`)])));
    let after = seenOf(seen.sourceImage, { ...seen.images, ...(await look(needy)) });
    const others = needy.filter((m) => after.images[m.node] !== "" && !sameImage(after.images[m.node], after.sourceImage));
    const incomplete = plan.holdBack.length > 0 ? await filterAsync(others, (m) => withoutLayers(m, s.ref)) : [];
    if (incomplete.length > 0) {
        // The containerd store's load takes a stream without a layer's blob, and ends with the image listed but
        // without its layers when its content store holds that layer under another blob digest (one copy gzipped,
        // the other not): the image runs, but it is incomplete. Those hosts get the whole image, once.
        const again = await runBash(chainCopyScript(s.source, s.ref, await hopsOf(incomplete), incomplete[0].target));
        r = { ...again, code: r.code || again.code, stderr: `${r.stderr}\n${again.stderr}` };
        after = seenOf(seen.sourceImage, { ...after.images, ...(await look(incomplete)) });
        plan.sent += `, then the whole image to node ${incomplete.map((m) => m.node).join(", ")} (a layer held back was not in its containerd store as the blob the image names)`;
    }
    const other = needy.filter((m) => after.images[m.node] !== "" && !sameImage(after.images[m.node], after.sourceImage));
    if (other.length > 0) {
        // never a pass: a host that holds another image under the reference after the copy
        throw new Error(
            `image ${s.ref} from ${sourceName(s.source)}: ` +
                other.map((m) => `node ${m.node} holds ${after.images[m.node]}`).join("; ") +
                ` after the chain copy, not the source's image ${after.sourceImage}`,
        );
    }
    const missing = needy.filter((m) => after.images[m.node] === "").map((m) => m.node);
    if (missing.length > 0) {
        // a host whose images changed between the plan and its load lacks a layer that was held back; the next
        // up plans again from what the hosts hold then
        const heldBack =
            plan.holdBack.length > 0 &&
            /(layer\.tar|blobs\/sha256\/[0-9a-f]{64}): no such file|failed to get reader from content store/.test(r.stderr)
                ? " (a layer held back was not on the host: run up again)"
                : "";
        throw new Error(
            `image ${s.ref} from ${sourceName(s.source)}: not on node ${missing.join(", ")} after the chain copy ` +
                `of ${plan.sent}${heldBack} (exit ${r.code}):\n${tail(r.stderr)}`,
        );
    }
    return { ...s, ...after, copied: needy.map((m) => m.node), sent: plan.sent };
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
        // a member holds the source's image when sameImage says so, whatever its ID on its own store
        const members = Object.fromEntries(
            Object.entries(olds.images ?? {}).map(([n, line]) => [n, sameImage(line, olds.sourceImage) ? olds.sourceImage! : line]),
        );
        return chainDiff(olds, news, ["ref", "source", "members", "built"], { source: olds.sourceImage, members });
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
        super(
            imageChainProvider,
            name,
            {
                ...args,
                sourceId: undefined,
                imageIds: undefined,
                sourceImage: undefined,
                images: undefined,
                copied: undefined,
                sent: undefined,
            },
            opts,
        );
    }
}

import * as pulumi from "@pulumi/pulumi";
import { parseImageFacts, sameImage } from "../builders/image";
import { lastLine, runBash, tail } from "./bash";

/**
 * Inputs of an ImagePresence. The scripts are built by the pure builders (../builders/image.ts) and travel as inputs,
 * so the provider itself only runs bash, and a change to how a host is reached shows up in the diff.
 */
export interface ImagePresenceInputs {
    /** Node the image must be present on. */
    node: pulumi.Input<string>;
    /** Configured image reference. */
    ref: pulumi.Input<string>;
    /** bash script that makes the image present and prints its facts line as the last line (imageEnsureScript). */
    ensureScript: pulumi.Input<string>;
    /** bash script that prints the image's facts line on the node, or nothing if it is absent (imageInspectScript). */
    inspectScript: pulumi.Input<string>;
    /**
     * The image the node must end up with: the source host's facts line (ImageFacts: on two classic stores the same
     * ID, otherwise the same layers, platform and run config); undefined when pulling from a registry.
     */
    expectedImage?: pulumi.Input<string | undefined>;
    /** `uname -m` of the node from preflight; the image architecture must fit it. */
    hostArch?: pulumi.Input<string | undefined>;
    /** The ID image.build gave the image on this node (the build's host only): a new build is looked at again. */
    built?: pulumi.Input<string | undefined>;
}

interface State {
    node: string;
    ref: string;
    ensureScript: string;
    inspectScript: string;
    expectedImage?: string;
    hostArch?: string;
    built?: string;
    /** The image's ID on this node (what its containers are made from), empty when absent. */
    imageId?: string;
    /** The image's facts line on this node, empty when absent. */
    image?: string;
}

const COMPARED_INPUTS = ["node", "ref", "ensureScript", "inspectScript", "expectedImage", "hostArch", "built"] as const;

/** Runs a script; resolves with stdout, rejects naming `what` with the stderr tail. */
async function run(script: string, env: Record<string, string>, what: string): Promise<string> {
    const r = await runBash(script, env);
    if (r.code !== 0) {
        throw new Error(`${what} failed (exit ${r.code}):\n${tail(r.stderr)}`);
    }
    return r.stdout;
}

async function ensure(s: State): Promise<{ imageId: string; image: string }> {
    const env: Record<string, string> = {};
    if (s.expectedImage) {
        env.EXPECTED_IMAGE = s.expectedImage;
    }
    if (s.hostArch) {
        env.HOST_ARCH = s.hostArch;
    }
    const image = lastLine(await run(s.ensureScript, env, `image ${s.ref} on node ${s.node}`));
    const facts = parseImageFacts(image);
    if (!facts) {
        throw new Error(`image ${s.ref} on node ${s.node}: expected the image's ID, store and content, got ${JSON.stringify(image)}`);
    }
    return { imageId: facts.id, image };
}

/** What a look at the host found: its facts line, or empty ID and facts when the image is absent. */
function seen(line: string): { imageId: string; image: string } {
    const facts = parseImageFacts(line);
    return facts ? { imageId: facts.id, image: line } : { imageId: "", image: "" };
}

/**
 * Makes an image present on one host. create/update stream it there (skipped when the host already holds the
 * source's image, sameImage), read re-inspects the host so `pulumi refresh` notices a removed or replaced image, and
 * diff compares the expected image with the one last seen on the host. delete leaves the image in place: it may be shared with
 * other workloads and re-copying tens of GB on the next deployment is the costly direction.
 */
export const imagePresenceProvider: pulumi.dynamic.ResourceProvider = {
    async check(_olds: State, news: State) {
        return { inputs: news };
    },

    async diff(_id: string, olds: State, news: State) {
        const changed: string[] = COMPARED_INPUTS.filter((k) => olds[k] !== news[k]);
        const expected = news.expectedImage;
        if (!olds.image || (expected !== undefined && expected !== "" && !sameImage(expected, olds.image))) {
            changed.push("image");
        }
        return { changes: changed.length > 0, replaces: [], deleteBeforeReplace: false };
    },

    async create(inputs: State) {
        return { id: `${inputs.node}/${inputs.ref}`, outs: { ...inputs, ...(await ensure(inputs)) } };
    },

    async update(_id: string, _olds: State, news: State) {
        return { outs: { ...news, ...(await ensure(news)) } };
    },

    async read(id: string, props?: State) {
        if (!props) {
            throw new Error(`cannot read image presence ${id} without its recorded state`);
        }
        const line = lastLine(await run(props.inspectScript, {}, `inspecting ${props.ref} on node ${props.node}`));
        return { id, props: { ...props, ...seen(line) } };
    },

    async delete() {
        // Intentionally leaves the image on the host (see above).
    },
};

/** The image ID of `ref` on one host, and its facts line, kept true by the dynamic provider above. */
export class ImagePresence extends pulumi.dynamic.Resource {
    declare public readonly imageId: pulumi.Output<string>;
    declare public readonly image: pulumi.Output<string>;

    constructor(name: string, args: ImagePresenceInputs, opts?: pulumi.CustomResourceOptions) {
        super(imagePresenceProvider, name, { ...args, imageId: undefined, image: undefined }, opts);
    }
}

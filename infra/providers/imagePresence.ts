import * as pulumi from "@pulumi/pulumi";
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
    /** bash script that makes the image present and prints its ID as the last line (imageEnsureScript). */
    ensureScript: pulumi.Input<string>;
    /** bash script that prints the image ID on the node, or nothing if it is absent (imageInspectScript). */
    inspectScript: pulumi.Input<string>;
    /** ID the node must end up with (the source host's ID); undefined when pulling from a registry. */
    expectedId?: pulumi.Input<string | undefined>;
    /** `uname -m` of the node from preflight; the image architecture must fit it. */
    hostArch?: pulumi.Input<string | undefined>;
}

interface State {
    node: string;
    ref: string;
    ensureScript: string;
    inspectScript: string;
    expectedId?: string;
    hostArch?: string;
    imageId?: string;
}

const COMPARED_INPUTS = ["node", "ref", "ensureScript", "inspectScript", "expectedId", "hostArch"] as const;

/** Runs a script; resolves with stdout, rejects naming `what` with the stderr tail. */
async function run(script: string, env: Record<string, string>, what: string): Promise<string> {
    const r = await runBash(script, env);
    if (r.code !== 0) {
        throw new Error(`${what} failed (exit ${r.code}):\n${tail(r.stderr)}`);
    }
    return r.stdout;
}

async function ensure(s: State): Promise<string> {
    const env: Record<string, string> = {};
    if (s.expectedId) {
        env.EXPECTED_ID = s.expectedId;
    }
    if (s.hostArch) {
        env.HOST_ARCH = s.hostArch;
    }
    const id = lastLine(await run(s.ensureScript, env, `image ${s.ref} on node ${s.node}`));
    if (!id.startsWith("sha256:")) {
        throw new Error(`image ${s.ref} on node ${s.node}: expected an image ID, got ${JSON.stringify(id)}`);
    }
    return id;
}

/**
 * Makes an image present on one host. create/update stream it there (skipped when the ID already matches),
 * read re-inspects the host so `pulumi refresh` notices a removed or replaced image, and diff compares the
 * expected ID with the ID last seen on the host. delete leaves the image in place: it may be shared with
 * other workloads and re-copying tens of GB on the next deployment is the costly direction.
 */
export const imagePresenceProvider: pulumi.dynamic.ResourceProvider = {
    async check(_olds: State, news: State) {
        return { inputs: news };
    },

    async diff(_id: string, olds: State, news: State) {
        const changed: string[] = COMPARED_INPUTS.filter((k) => olds[k] !== news[k]);
        const expected = news.expectedId;
        if (!olds.imageId || (expected !== undefined && expected !== "" && expected !== olds.imageId)) {
            changed.push("imageId");
        }
        return { changes: changed.length > 0, replaces: [], deleteBeforeReplace: false };
    },

    async create(inputs: State) {
        const imageId = await ensure(inputs);
        return { id: `${inputs.node}/${inputs.ref}`, outs: { ...inputs, imageId } };
    },

    async update(_id: string, _olds: State, news: State) {
        const imageId = await ensure(news);
        return { outs: { ...news, imageId } };
    },

    async read(id: string, props?: State) {
        if (!props) {
            throw new Error(`cannot read image presence ${id} without its recorded state`);
        }
        const imageId = lastLine(await run(props.inspectScript, {}, `inspecting ${props.ref} on node ${props.node}`));
        return { id, props: { ...props, imageId } };
    },

    async delete() {
        // Intentionally leaves the image on the host (see above).
    },
};

/** The image ID of `ref` on one host, kept true by the dynamic provider above. */
export class ImagePresence extends pulumi.dynamic.Resource {
    declare public readonly imageId: pulumi.Output<string>;

    constructor(name: string, args: ImagePresenceInputs, opts?: pulumi.CustomResourceOptions) {
        super(imagePresenceProvider, name, { ...args, imageId: undefined }, opts);
    }
}

import * as pulumi from "@pulumi/pulumi";
import { ImageOrigin, SshTarget, imageEnsureScript, imageInspectScript } from "./commands";
import { ImagePresence, ImagePresenceInputs } from "./imageProvider";
import { SparkNode } from "./sparkNode";

export interface ImageDistributionArgs {
    /** Image reference as configured (tag or digest). */
    ref: string;
    /** host: already on `sourceNode`; local: on the operator's docker engine; registry: each host pulls. */
    source: "host" | "local" | "registry";
    /** Node holding the image when source is host. */
    sourceNode?: string;
    /** Every node that must run the image. */
    nodes: SparkNode[];
}

/** Where the image comes from, for the ensure scripts (source=host: the source node reached over ssh). */
export function imageOrigin(
    source: ImageDistributionArgs["source"],
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

/** Inputs of the ImagePresence for one node: the scripts that make `ref` present there and read its ID. */
export function imagePresenceInputs(
    origin: ImageOrigin,
    node: { name: string; ssh: SshTarget },
    ref: string,
    expectedId: pulumi.Input<string> | undefined,
    hostArch: pulumi.Input<string> | undefined,
): ImagePresenceInputs {
    return {
        node: node.name,
        ref,
        ensureScript: imageEnsureScript(origin, node.ssh, node.name, ref),
        inspectScript: imageInspectScript(node.ssh, ref),
        expectedId,
        hostArch,
    };
}

/**
 * Makes the image present on every host and exposes the image ID per host; containers take that ID as their
 * image, so a changed image replaces exactly the containers on hosts whose ID changed. Hosts are independent
 * resources and copy in parallel; with source=host the source host's ID is the expected ID everywhere else.
 */
export class ImageDistribution extends pulumi.ComponentResource {
    /** Image ID by node name. */
    public readonly imageIds: Record<string, pulumi.Output<string>>;

    constructor(name: string, args: ImageDistributionArgs, opts?: pulumi.ComponentResourceOptions) {
        super("vllm-cluster:index:ImageDistribution", name, {}, opts);

        const all = args.nodes.map((n) => ({ name: n.node.name, ssh: n.ssh }));
        let origin: ImageOrigin;
        try {
            origin = imageOrigin(args.source, args.sourceNode, all);
        } catch (e) {
            throw new Error(`${name}: ${(e as Error).message}`);
        }
        const sourceNode = origin.kind === "host" ? args.nodes.find((n) => n.node.name === args.sourceNode) : undefined;

        const presence = (n: SparkNode, expectedId?: pulumi.Input<string>) =>
            new ImagePresence(
                `${name}-${n.node.name}`,
                imagePresenceInputs(origin, { name: n.node.name, ssh: n.ssh }, args.ref, expectedId, n.arch),
                { parent: this },
            );

        const ids: Record<string, pulumi.Output<string>> = {};
        const fromSource = sourceNode ? presence(sourceNode) : undefined;
        if (sourceNode && fromSource) {
            ids[sourceNode.node.name] = fromSource.imageId;
        }
        for (const n of args.nodes) {
            if (n !== sourceNode) {
                ids[n.node.name] = presence(n, fromSource?.imageId).imageId;
            }
        }
        this.imageIds = ids;

        this.registerOutputs({ imageIds: this.imageIds });
    }
}

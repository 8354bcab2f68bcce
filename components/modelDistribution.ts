import * as pulumi from "@pulumi/pulumi";
import { ModelChain } from "../infra/providers/modelChain";
import { SparkNode } from "./sparkNode";

export interface ModelDistributionArgs {
    /** The model directory, at the same path on every host. */
    hostPath: string;
    /** The node that holds the model; the others get a copy. */
    sourceNode: string;
    /** Every node of the stack, in stack order (the chain's order). */
    nodes: SparkNode[];
    /** How many streams each link of the chain carries at once (distribution.modelStreams). */
    streams: number;
    /** What must pass before the model is read or copied: every host's preflight. */
    after: pulumi.Input<pulumi.Resource>[];
}

/**
 * The model directory of one node copied to every other node along one chain (ModelChain), and the model's content
 * checksum: every container that mounts the model takes it as data, so it starts after the copy and new model
 * content replaces it. With one node the chain has no member and only reads the source's checksum.
 */
export class ModelDistribution extends pulumi.ComponentResource {
    /** sha256 of the source's manifest (every file's sha256 and path). */
    public readonly digest: pulumi.Output<string>;

    constructor(name: string, args: ModelDistributionArgs, opts?: pulumi.ComponentResourceOptions) {
        super("vllm-cluster:index:ModelDistribution", name, {}, opts);
        const source = args.nodes.find((n) => n.node.name === args.sourceNode);
        if (!source) {
            throw new Error(
                `${name}: source node ${args.sourceNode} is not one of the nodes (${args.nodes.map((n) => n.node.name).join(", ")})`,
            );
        }
        const chain = new ModelChain(
            `${name}-chain`,
            {
                hostPath: args.hostPath,
                source: source.member,
                members: args.nodes.filter((n) => n !== source).map((n) => n.member),
                streams: args.streams,
            },
            { parent: this, dependsOn: args.after },
        );
        this.digest = chain.digest;

        this.registerOutputs({ digest: this.digest });
    }
}

import * as pulumi from "@pulumi/pulumi";
import { hubDownloadScript } from "../infra/builders/hub";
import { HubModel } from "../infra/providers/hubModel";
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
    /** model.hub: download the model on the source node first (in `image`, that node's image ID), then copy it. */
    hub?: {
        repo: string;
        revision: string;
        endpoint: string;
        image: pulumi.Input<string>;
        /** The secret config hfToken, when set. */
        token?: pulumi.Output<string>;
    };
}

/**
 * The model directory of one node copied to every other node along one chain (ModelChain), and the model's content
 * checksum: every container that mounts the model takes it as data, so it starts after the copy and new model
 * content replaces it. With one node the chain has no member and only reads the source's checksum.
 */
export class ModelDistribution extends pulumi.ComponentResource {
    /** sha256 of the source's manifest (every file's sha256 and path). */
    public readonly digest: pulumi.Output<string>;
    /** model.hub: the commit downloaded (the revision resolved at the Hub). */
    public readonly hubCommit?: pulumi.Output<string>;

    constructor(name: string, args: ModelDistributionArgs, opts?: pulumi.ComponentResourceOptions) {
        super("vllm-cluster:index:ModelDistribution", name, {}, opts);
        const source = args.nodes.find((n) => n.node.name === args.sourceNode);
        if (!source) {
            throw new Error(
                `${name}: source node ${args.sourceNode} is not one of the nodes (${args.nodes.map((n) => n.node.name).join(", ")})`,
            );
        }
        const hub = args.hub
            ? new HubModel(
                  `${name}-hub`,
                  {
                      node: source.node.name,
                      target: source.ssh,
                      repo: args.hub.repo,
                      revision: args.hub.revision,
                      endpoint: args.hub.endpoint,
                      hostPath: args.hostPath,
                      image: args.hub.image,
                      script: hubDownloadScript(),
                      token: args.hub.token,
                  },
                  { parent: this, dependsOn: args.after },
              )
            : undefined;
        const chain = new ModelChain(
            `${name}-chain`,
            {
                hostPath: args.hostPath,
                source: source.member,
                members: args.nodes.filter((n) => n !== source).map((n) => n.member),
                streams: args.streams,
                hubCommit: hub?.commit,
            },
            { parent: this, dependsOn: [...args.after, ...(hub ? [hub] : [])] },
        );
        this.digest = chain.digest;
        this.hubCommit = hub?.commit;

        this.registerOutputs({ digest: this.digest, hubCommit: this.hubCommit });
    }
}

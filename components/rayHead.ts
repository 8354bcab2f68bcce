import * as docker from "@pulumi/docker";
import * as pulumi from "@pulumi/pulumi";
import { containerOptions } from "../infra/builders/containers";
import { RayHeadContainerInput, rayHeadContainerArgs } from "../infra/builders/rayContainers";
import { SparkNode } from "./sparkNode";

export interface RayHeadArgs extends Omit<RayHeadContainerInput, "node"> {
    /** The head host (provider, node facts). */
    host: SparkNode;
}

/** The Ray head container, bound to the head's fabric IP; the dashboard stays on loopback. */
export class RayHead extends pulumi.ComponentResource {
    public readonly container: docker.Container;
    /** `<fabric IP>:<gcs port>`, resolved once the container exists: workers take it as input. */
    public readonly address: pulumi.Output<string>;

    constructor(name: string, args: RayHeadArgs, opts?: pulumi.ComponentResourceOptions) {
        super("vllm-cluster:index:RayHead", name, {}, opts);
        const { host, ...input } = args;
        const node = host.node;

        this.container = new docker.Container(
            `${name}-container`,
            rayHeadContainerArgs({ ...input, node }),
            containerOptions(this, host.provider),
        );

        const address = `${node.fabricIp}:${args.ports.gcsPort}`;
        this.address = this.container.id.apply(() => address);

        this.registerOutputs({ address: this.address });
    }
}

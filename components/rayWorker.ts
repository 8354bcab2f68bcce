import * as docker from "@pulumi/docker";
import * as pulumi from "@pulumi/pulumi";
import { containerOptions } from "../infra/builders/containers";
import { RayWorkerContainerInput, rayWorkerContainerArgs } from "../infra/builders/rayContainers";
import { SparkNode } from "./sparkNode";

/**
 * `headAddress` is the head's address output, so the worker starts after the head container exists;
 * `headContainerId` makes a replaced head replace its workers too (a worker holds connections into the head's
 * Ray session; container labels force a new container).
 */
export interface RayWorkerArgs extends Omit<RayWorkerContainerInput, "node"> {
    /** The worker host (provider, node facts). */
    host: SparkNode;
}

/** A Ray worker container joining the head over the fabric network with its own fabric IP. */
export class RayWorker extends pulumi.ComponentResource {
    public readonly container: docker.Container;

    constructor(name: string, args: RayWorkerArgs, opts?: pulumi.ComponentResourceOptions) {
        super("vllm-cluster:index:RayWorker", name, {}, opts);
        const { host, ...input } = args;

        this.container = new docker.Container(
            `${name}-container`,
            rayWorkerContainerArgs({ ...input, node: host.node }),
            containerOptions(this, host.provider),
        );

        this.registerOutputs({ containerId: this.container.id });
    }
}

import * as docker from "@pulumi/docker";
import * as pulumi from "@pulumi/pulumi";
import { containerOptions } from "../infra/builders/containers";
import { RayWorkerContainerInput, rayWorkerContainerArgs } from "../infra/builders/rayContainers";
import { RayHead, rayTokenFileOn } from "./rayHead";
import { SparkNode } from "./sparkNode";

export interface RayWorkerArgs extends Omit<RayWorkerContainerInput, "node" | "headAddress" | "headContainerId" | "rayTokenHash"> {
    /** The worker host (provider, node facts, state directory). */
    host: SparkNode;
    /**
     * The head it joins: its address (so the worker starts after the head container exists), its container ID (a
     * replaced head replaces its workers: a worker holds connections into the head's Ray session) and its token.
     */
    head: RayHead;
}

/** A Ray worker: the cluster's token as a file on its host, and the container that joins the head over the fabric. */
export class RayWorker extends pulumi.ComponentResource {
    public readonly container: docker.Container;

    constructor(name: string, args: RayWorkerArgs, opts?: pulumi.ComponentResourceOptions) {
        super("vllm-cluster:index:RayWorker", name, {}, opts);
        const { host, head, ...input } = args;
        const rayTokenHash = head.token ? rayTokenFileOn(this, host, head.token, head.cluster) : undefined;

        this.container = new docker.Container(
            `${name}-container`,
            rayWorkerContainerArgs({
                ...input,
                node: host.node,
                headAddress: head.address,
                headContainerId: head.container.id,
                rayTokenHash,
            }),
            containerOptions(this, host),
        );

        this.registerOutputs({ containerId: this.container.id });
    }
}

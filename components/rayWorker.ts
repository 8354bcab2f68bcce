import * as docker from "@pulumi/docker";
import * as pulumi from "@pulumi/pulumi";
import { RAY_ENTRYPOINT, RAY_WORKER_CONTAINER, containerLabels, nodeEnv, rayWorkerCommand } from "./commands";
import { baseContainerArgs, modelVolume } from "./containerArgs";
import { SparkNode } from "./sparkNode";

export interface RayWorkerArgs {
    /** The worker host (provider, node facts). */
    host: SparkNode;
    /** Image ID on this host. */
    imageId: pulumi.Input<string>;
    /** Configured image reference (label only). */
    imageRef: string;
    stack: string;
    /** The head's `<fabric IP>:<gcs port>` output: the worker starts after the head container exists. */
    headAddress: pulumi.Input<string>;
    /**
     * The head container's ID. A worker holds connections into the head's Ray session; when the head is
     * replaced the worker must be replaced too, so the ID is carried as a label (container labels force a new
     * container).
     */
    headContainerId: pulumi.Input<string>;
    objectStoreMemoryBytes?: number;
    model: { hostPath: string; containerPath: string };
    shmSize?: string;
    maxRestarts: number;
}

/** A Ray worker container joining the head over the fabric network with its own fabric IP. */
export class RayWorker extends pulumi.ComponentResource {
    public readonly container: docker.Container;

    constructor(name: string, args: RayWorkerArgs, opts?: pulumi.ComponentResourceOptions) {
        super("vllm-cluster:index:RayWorker", name, {}, opts);
        const node = args.host.node;

        this.container = new docker.Container(
            `${name}-container`,
            baseContainerArgs({
                containerName: RAY_WORKER_CONTAINER,
                node,
                imageId: args.imageId,
                entrypoints: RAY_ENTRYPOINT,
                command: pulumi
                    .output(args.headAddress)
                    .apply((headAddress) => rayWorkerCommand({ node, headAddress, objectStoreMemoryBytes: args.objectStoreMemoryBytes })),
                envs: nodeEnv(node),
                labels: containerLabels({
                    stack: args.stack,
                    role: "ray-worker",
                    node,
                    imageRef: args.imageRef,
                    ports: {},
                }),
                dynamicLabels: [{ label: "vllm-cluster.head-container-id", value: args.headContainerId }],
                volumes: [modelVolume(args.model.hostPath, args.model.containerPath)],
                shmSize: args.shmSize,
                maxRestarts: args.maxRestarts,
            }),
            { parent: this, provider: args.host.provider, deleteBeforeReplace: true },
        );

        this.registerOutputs({ containerId: this.container.id });
    }
}

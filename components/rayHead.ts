import * as docker from "@pulumi/docker";
import * as pulumi from "@pulumi/pulumi";
import {
    RAY_ENTRYPOINT,
    RAY_HEAD_CONTAINER,
    RAY_SESSION_CONTAINER_DIR,
    RayPorts,
    DASHBOARD_HOST,
    containerLabels,
    nodeEnv,
    rayHeadCommand,
    rayHeadPortsLabel,
    raySessionHostDir,
} from "./commands";
import { baseContainerArgs, modelVolume } from "./containerArgs";
import { SparkNode } from "./sparkNode";

export interface RayHeadArgs {
    /** The head host (provider, node facts). */
    host: SparkNode;
    /** Image ID on the head host. */
    imageId: pulumi.Input<string>;
    /** Configured image reference (label only). */
    imageRef: string;
    stack: string;
    ports: RayPorts;
    objectStoreMemoryBytes?: number;
    stateDir: string;
    model: { hostPath: string; containerPath: string };
    shmSize?: string;
    maxRestarts: number;
}

/** The Ray head container, bound to the head's fabric IP; the dashboard stays on loopback. */
export class RayHead extends pulumi.ComponentResource {
    public readonly container: docker.Container;
    /** `<fabric IP>:<gcs port>`, resolved once the container exists: workers take it as input. */
    public readonly address: pulumi.Output<string>;

    constructor(name: string, args: RayHeadArgs, opts?: pulumi.ComponentResourceOptions) {
        super("vllm-cluster:index:RayHead", name, {}, opts);
        const node = args.host.node;

        this.container = new docker.Container(
            `${name}-container`,
            baseContainerArgs({
                containerName: RAY_HEAD_CONTAINER,
                node,
                imageId: args.imageId,
                entrypoints: RAY_ENTRYPOINT,
                command: rayHeadCommand({
                    node,
                    ports: args.ports,
                    objectStoreMemoryBytes: args.objectStoreMemoryBytes,
                }),
                envs: nodeEnv(node),
                labels: containerLabels(
                    {
                        stack: args.stack,
                        role: "ray-head",
                        node,
                        imageRef: args.imageRef,
                        ports: rayHeadPortsLabel(args.ports),
                    },
                    { "dashboard-host": DASHBOARD_HOST },
                ),
                volumes: [
                    modelVolume(args.model.hostPath, args.model.containerPath),
                    { hostPath: raySessionHostDir(args.stateDir, node.name), containerPath: RAY_SESSION_CONTAINER_DIR },
                ],
                shmSize: args.shmSize,
                maxRestarts: args.maxRestarts,
            }),
            { parent: this, provider: args.host.provider, deleteBeforeReplace: true },
        );

        const address = `${node.fabricIp}:${args.ports.gcsPort}`;
        this.address = this.container.id.apply(() => address);

        this.registerOutputs({ address: this.address });
    }
}

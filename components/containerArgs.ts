import * as docker from "@pulumi/docker";
import * as pulumi from "@pulumi/pulumi";
import { NodeSpec, labelList, shmSizeMb } from "./commands";

/** What every project container shares; role-specific parts are passed in. */
export interface BaseContainerInputs {
    containerName: string;
    node: NodeSpec;
    /** Image ID on this host (output of ImageDistribution), so an image change replaces the container. */
    imageId: pulumi.Input<string>;
    entrypoints: string[];
    command: pulumi.Input<pulumi.Input<string>[]>;
    envs: pulumi.Input<pulumi.Input<string>[]>;
    labels: Record<string, string>;
    /** Labels whose value is only known at deploy time (e.g. the cluster fingerprint). */
    dynamicLabels?: { label: string; value: pulumi.Input<string> }[];
    volumes: docker.types.input.ContainerVolume[];
    shmSize?: string;
    maxRestarts: number;
}

/**
 * Host network and IPC (NCCL and Ray's object store need both), GPUs only with the nvidia runtime, bounded
 * restarts so a crash loop cannot leak GPU memory forever, and mustRun so `pulumi refresh` sees a dead
 * container as drift.
 */
export function baseContainerArgs(c: BaseContainerInputs): docker.ContainerArgs {
    return {
        name: c.containerName,
        image: c.imageId,
        networkMode: "host",
        ipcMode: "host",
        shmSize: shmSizeMb(c.shmSize),
        entrypoints: c.entrypoints,
        command: c.command,
        envs: c.envs,
        labels: [...labelList(c.labels), ...(c.dynamicLabels ?? [])],
        volumes: c.volumes,
        gpus: c.node.gpuRuntime === "nvidia" ? "all" : undefined,
        restart: "on-failure",
        maxRetryCount: c.maxRestarts,
        mustRun: true,
        wait: false,
        destroyGraceSeconds: 30,
    };
}

export function modelVolume(hostPath: string, containerPath: string): docker.types.input.ContainerVolume {
    return { hostPath, containerPath, readOnly: true };
}

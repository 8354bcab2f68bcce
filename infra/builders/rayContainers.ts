/** The Ray head and worker containers (backend ray). */
import * as docker from "@pulumi/docker";
import * as pulumi from "@pulumi/pulumi";
import { DASHBOARD_HOST, LABEL, containerNames, containerPorts, portsLabel } from "../contract";
import { ContainerInput, containerArgs, mapInput, modelVolume } from "./containers";
import { containerLabels } from "./labels";
import { nodeEnv } from "./node";

/** A Ray node that ran this long without exiting is up: a crash after it starts its budget again. */
export const RAY_STABLE_SECONDS = 60;
import { RAY_ENTRYPOINT, RayNodePorts, RayPorts, rayHeadCommand, rayHeadPortEnv, rayWorkerCommand } from "./ray";

export interface RayHeadContainerInput extends ContainerInput {
    ports: RayPorts;
    objectStoreMemoryBytes?: number;
}

/** The Ray head container: bound to the head's fabric IP, dashboard on loopback. */
export function rayHeadContainerArgs(p: RayHeadContainerInput): docker.ContainerArgs {
    return containerArgs(p, {
        containerName: containerNames(p.cluster).rayHead,
        entrypoints: RAY_ENTRYPOINT,
        command: rayHeadCommand({ node: p.node, ports: p.ports, objectStoreMemoryBytes: p.objectStoreMemoryBytes }),
        envs: [...nodeEnv(p.node), ...rayHeadPortEnv(p.ports)],
        labels: containerLabels(
            {
                stack: p.stack,
                cluster: p.cluster,
                role: "ray-head",
                node: p.node,
                imageRef: p.imageRef,
                ports: portsLabel(containerPorts("ray-head", p.ports)),
            },
            { "dashboard-host": DASHBOARD_HOST },
        ),
        volumes: [modelVolume(p.model)],
        init: { stableSeconds: RAY_STABLE_SECONDS },
    });
}

export interface RayWorkerContainerInput extends ContainerInput {
    /** The head's `<fabric IP>:<gcs port>` (deploy-time: known once the head container exists). */
    headAddress: pulumi.Input<string>;
    /** The head container's ID, carried as a label so a replaced head replaces its workers. */
    headContainerId: pulumi.Input<string>;
    ports: RayNodePorts;
    objectStoreMemoryBytes?: number;
}

/** A Ray worker container joining the head over the fabric with its own fabric IP. */
export function rayWorkerContainerArgs(p: RayWorkerContainerInput): docker.ContainerArgs {
    return containerArgs(p, {
        containerName: containerNames(p.cluster).rayWorker,
        entrypoints: RAY_ENTRYPOINT,
        command: mapInput(p.headAddress, (headAddress) =>
            rayWorkerCommand({ node: p.node, headAddress, ports: p.ports, objectStoreMemoryBytes: p.objectStoreMemoryBytes }),
        ),
        envs: nodeEnv(p.node),
        labels: containerLabels({
            stack: p.stack,
            cluster: p.cluster,
            role: "ray-worker",
            node: p.node,
            imageRef: p.imageRef,
            ports: portsLabel(containerPorts("ray-worker", p.ports)),
        }),
        dynamicLabels: [{ label: LABEL.headContainerId, value: p.headContainerId }],
        volumes: [modelVolume(p.model)],
        // after a reboot the worker may come back before the head: it waits for the head's GCS, not spending its budget
        init: { stableSeconds: RAY_STABLE_SECONDS, waitTcp: p.headAddress },
    });
}

/**
 * The preflight each host runs before anything is deployed on it (infra/scripts/preflight.sh): what the manual
 * deployment found broken by hand (docker unreachable, the fabric IP on another interface, a port held by a
 * stopped proxy, a wrong GPU count). It also creates the node's private state directories.
 */
import type { NodeConfig } from "../config";
import { DEFAULT_CLUSTER, LABEL } from "../contract";
import { RemoteStep, remoteStepCommand } from "./remoteStep";
import type { SshTarget } from "./ssh";

/** Whose ports these are: the stack and the cluster whose containers may hold them (another's may not). */
export interface PortOwner {
    stack: string;
    cluster: string;
}

/** The cluster label's value on a cluster's containers: none (empty) for DEFAULT_CLUSTER, as containerLabels sets it. */
function clusterLabelValue(cluster: string): string {
    return cluster === DEFAULT_CLUSTER ? "" : cluster;
}

/** A host that a chain copy may forward to from the host under check, at the address and port it will dial. */
export interface PreflightPeer {
    node: string;
    host: string;
    port: number;
    /** Which address that is (distribution.network), for the error. */
    network: "fabric" | "management";
}

/**
 * The preflight step of node `n`: `ports` are the host ports its containers will listen on (none: no port check),
 * `peers` the hosts it may forward a chain copy to (each must answer as an sshd there); it prints one JSON line of
 * facts, {"node","arch","dockerVersion","gpusSeen"}.
 */
export function preflightStep(
    n: NodeConfig,
    stateDir: string,
    ports: readonly number[],
    peers: readonly PreflightPeer[] = [],
    modelDir?: string,
    owner?: PortOwner,
): RemoteStep {
    const args = [
        `node=${n.name}`,
        `login=${n.sshUser}@${n.sshHost}`,
        `state-dir=${stateDir}`,
        `fabric-interface=${n.fabricInterface}`,
        `fabric-ip=${n.fabricIp}`,
        `gpu-runtime=${n.gpuRuntime}`,
        `gpus=${n.gpus}`,
        ...(ports.length > 0 ? [`ports=${ports.join(",")}`, `managed-label=${LABEL.managed}`] : []),
        // another stack's or cluster's containers on the host must not claim one of those ports
        ...(ports.length > 0 && owner !== undefined ? [`stack=${owner.stack}`, `cluster=${clusterLabelValue(owner.cluster)}`] : []),
        ...peers.map((p) => `ssh-peer=${p.node}@${p.host}:${p.port}:${p.network}`),
        // checked not to be on a file system that a reboot empties, where it exists
        ...(modelDir !== undefined ? [`model-dir=${modelDir}`] : []),
    ];
    return { what: `preflight on node ${n.name}`, script: "preflight.sh", args };
}

export function preflightCommand(
    t: SshTarget,
    n: NodeConfig,
    stateDir: string,
    ports: readonly number[],
    peers: readonly PreflightPeer[] = [],
    modelDir?: string,
    owner?: PortOwner,
): string {
    return remoteStepCommand(t, preflightStep(n, stateDir, ports, peers, modelDir, owner));
}

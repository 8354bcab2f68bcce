/** The stack's `status` output (infra/builders/status.ts: what it holds) and the other outputs that describe the cluster. */
import type { ClusterConfig } from "../config";
import { DEFAULT_CLUSTER, containerNames } from "../contract";
import { floorKib } from "./containerInit";
import type { StatusNode, StatusSpec } from "./status";

/** The outputs that only describe the cluster: what it serves, its hosts, and where `npm run status` looks. */
export function describedOutputs(
    cfg: ClusterConfig,
    stack: string,
    cluster: string = DEFAULT_CLUSTER,
): { servedModelName: string; nodes: ClusterNodeOutput[]; status: StatusSpec } {
    return {
        servedModelName: cfg.model.servedName,
        nodes: cfg.nodes.map((n) => ({ name: n.name, role: n.role, sshHost: n.sshHost, fabricIp: n.fabricIp, gpus: n.gpus })),
        status: statusSpecOf(cfg, stack, cluster),
    };
}

/** One host as the `nodes` output lists it. */
export type ClusterNodeOutput = Pick<StatusNode, "name" | "role" | "sshHost" | "fabricIp" | "gpus">;

/** The `status` output of a validated config (`cfg.stateDir`: the cluster's own, clusterStateDir's). */
export function statusSpecOf(cfg: ClusterConfig, stack: string, cluster: string = DEFAULT_CLUSTER): StatusSpec {
    const names = containerNames(cluster);
    return {
        stack,
        cluster,
        defaultCluster: cluster === DEFAULT_CLUSTER,
        backend: cfg.backend,
        stateDir: cfg.stateDir,
        privateKeyPath: cfg.ssh.privateKeyPath,
        knownHostsFile: cfg.ssh.knownHostsFile,
        modelPath: cfg.model.hostPath,
        servedModelName: cfg.model.servedName,
        port: cfg.serve.port,
        tls: cfg.serve.tls !== undefined,
        gcsPort: cfg.ray.gcsPort,
        rayHead: names.rayHead,
        serve: names.serve,
        nodes: cfg.nodes.map((n) => ({
            name: n.name,
            role: n.role,
            sshHost: n.sshHost,
            sshUser: n.sshUser,
            sshPort: n.sshPort,
            fabricIp: n.fabricIp,
            gpus: n.gpus,
            memoryFloorKib: floorKib(n, cfg.memoryGuard),
        })),
    };
}

/** The stack's `status` output (infra/builders/status.ts: what it holds) and the other outputs that describe the cluster. */
import type { ClusterConfig } from "../config";
import { CONTAINER } from "../contract";
import { floorKib } from "./containerInit";
import type { StatusNode, StatusSpec } from "./status";

/** The outputs that only describe the cluster: what it serves, its hosts, and where `npm run status` looks. */
export function describedOutputs(
    cfg: ClusterConfig,
    stack: string,
): { servedModelName: string; nodes: ClusterNodeOutput[]; status: StatusSpec } {
    return {
        servedModelName: cfg.model.servedName,
        nodes: cfg.nodes.map((n) => ({ name: n.name, role: n.role, sshHost: n.sshHost, fabricIp: n.fabricIp, gpus: n.gpus })),
        status: statusSpecOf(cfg, stack),
    };
}

/** One host as the `nodes` output lists it. */
export type ClusterNodeOutput = Pick<StatusNode, "name" | "role" | "sshHost" | "fabricIp" | "gpus">;

/** The `status` output of a validated config. */
export function statusSpecOf(cfg: ClusterConfig, stack: string): StatusSpec {
    return {
        stack,
        backend: cfg.backend,
        stateDir: cfg.stateDir,
        privateKeyPath: cfg.ssh.privateKeyPath,
        knownHostsFile: cfg.ssh.knownHostsFile,
        modelPath: cfg.model.hostPath,
        servedModelName: cfg.model.servedName,
        port: cfg.serve.port,
        tls: cfg.serve.tls !== undefined,
        gcsPort: cfg.ray.gcsPort,
        rayHead: CONTAINER.rayHead,
        serve: CONTAINER.serve,
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

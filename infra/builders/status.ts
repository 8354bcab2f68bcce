/**
 * What `npm run status` needs to ask the hosts (setup/status.js), as the stack's `status` output: names, paths and
 * ports, never a secret (statusSpec.ts makes it from the config). The probe's command line
 * (infra/scripts/status_probe.bash) is built from that output alone, so the view needs neither the stack file nor
 * the passphrase. Only light modules here: the view loads this file at every start.
 */
import { LABEL } from "../contract";
import { initHostDir } from "./node";
import { RemoteStep, base64, remoteStepCommand, scriptFile } from "./remoteStep";
import type { SshTarget } from "./ssh";

/** One host as the status view reaches it. */
export interface StatusNode {
    name: string;
    /** head or worker */
    role: string;
    sshHost: string;
    sshUser: string;
    sshPort: number;
    fabricIp: string;
    gpus: number;
    /** The memory guard's floor of the host's MemAvailable, KiB (0: none). */
    memoryFloorKib: number;
}

/** The stack's `status` output. */
export interface StatusSpec {
    stack: string;
    /** The VllmCluster's name; its containers carry it in LABEL.cluster unless it is the stack program's (DEFAULT_CLUSTER). */
    cluster: string;
    defaultCluster: boolean;
    /** ray or native */
    backend: string;
    /** The cluster's state directory on the hosts; a node's init files are under <stateDir>/<node>/init. */
    stateDir: string;
    /** The files ssh uses, on the machine that runs Pulumi (and the view). */
    privateKeyPath: string;
    knownHostsFile: string;
    /** The model directory on the hosts (free disk is read there). */
    modelPath: string;
    servedModelName: string;
    /** The API's port on the head, and whether it speaks HTTPS. */
    port: number;
    tls: boolean;
    /** The Ray head's GCS port (backend ray). */
    gcsPort: number;
    /** Container names on the hosts. */
    rayHead: string;
    serve: string;
    nodes: StatusNode[];
}

export function statusTarget(spec: StatusSpec, n: StatusNode): SshTarget {
    return {
        user: n.sshUser,
        host: n.sshHost,
        port: n.sshPort,
        privateKeyPath: spec.privateKeyPath,
        knownHostsFile: spec.knownHostsFile,
    };
}

/** The head of the status output's nodes; an output without one is refused, naming what it lists. */
export function headOf(spec: StatusSpec): StatusNode {
    const head = spec.nodes.find((n) => n.role === "head");
    if (!head) {
        throw new Error(`the status output names no head (nodes: ${spec.nodes.map((n) => `${n.name} ${n.role}`).join(", ")})`);
    }
    return head;
}

/** Where Ray's GCS listens: the head's fabric IP and the GCS port. */
export function statusRayAddress(spec: StatusSpec): string {
    return `${headOf(spec).fabricIp}:${spec.gcsPort}`;
}

/**
 * The probe of node `n`: the stack's containers and their init files there, memory, disk at the model path; on the
 * head also vLLM's /metrics (over loopback) and, with backend ray, Ray's members from the head container.
 */
export function statusProbeStep(spec: StatusSpec, n: StatusNode): RemoteStep {
    const head = headOf(spec).name === n.name;
    const args = [
        `node=${n.name}`,
        `init-dir=${initHostDir(spec.stateDir, n.name)}`,
        `model-path=${spec.modelPath}`,
        `stack-label=${LABEL.stack}`,
        `stack=${spec.stack}`,
        `cluster-label=${LABEL.cluster}`,
        // the stack program's cluster: the stack's containers without a cluster label; any other: those with its name
        `cluster=${spec.defaultCluster ? "" : spec.cluster}`,
        `role-label=${LABEL.role}`,
        `rank-label=${LABEL.nodeRank}`,
    ];
    if (head) args.push(`metrics-port=${spec.port}`, `tls=${spec.tls ? "yes" : "no"}`);
    if (head && spec.backend === "ray") {
        args.push(
            `ray-container=${spec.rayHead}`,
            `ray-probe=${base64(scriptFile("ray_members.py").text)}`,
            `ray-address=${statusRayAddress(spec)}`,
        );
    }
    return { what: `status of node ${n.name}`, script: "status_probe.bash", args };
}

/** The local shell command line that asks node `n` (a session of the view's one shared connection to the host). */
export function statusProbeCommand(spec: StatusSpec, n: StatusNode): string {
    return remoteStepCommand(statusTarget(spec, n), statusProbeStep(spec, n));
}

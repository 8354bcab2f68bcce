/** Ray: the head and worker `ray start` command lines, the cluster readiness probe, the dashboard tunnel. */
import type { NodeConfig } from "../config";
import { CONTAINER, DASHBOARD_HOST } from "../contract";
import { RemoteStep, remoteStepCommand } from "./remoteStep";
import type { SshTarget } from "./ssh";

/** What every Ray node listens on besides the head's own ports (ray.nodeManagerPort and the rest). */
export interface RayNodePorts {
    nodeManagerPort: number;
    objectManagerPort: number;
    runtimeEnvAgentPort: number;
    dashboardAgentGrpcPort: number;
    metricsExportPort: number;
    dashboardAgentPort: number;
    minWorkerPort: number;
    maxWorkerPort: number;
}

export interface RayPorts extends RayNodePorts {
    gcsPort: number;
    dashboardPort: number;
    clientPort: number;
    autoscalerMetricsPort: number;
    dashboardMetricsPort: number;
}

/** The head's ports Ray reads from its environment only (no `ray start` flag sets them). */
export function rayHeadPortEnv(p: Pick<RayPorts, "autoscalerMetricsPort" | "dashboardMetricsPort">): string[] {
    return [`AUTOSCALER_METRIC_PORT=${p.autoscalerMetricsPort}`, `DASHBOARD_METRIC_PORT=${p.dashboardMetricsPort}`];
}

/** `ray start` flags that pin every port a Ray node opens (Ray would pick most at random). */
function nodePortFlags(p: RayNodePorts): string[] {
    return [
        `--node-manager-port=${p.nodeManagerPort}`,
        `--object-manager-port=${p.objectManagerPort}`,
        `--runtime-env-agent-port=${p.runtimeEnvAgentPort}`,
        `--dashboard-agent-grpc-port=${p.dashboardAgentGrpcPort}`,
        `--dashboard-agent-listen-port=${p.dashboardAgentPort}`,
        `--metrics-export-port=${p.metricsExportPort}`,
        `--min-worker-port=${p.minWorkerPort}`,
        `--max-worker-port=${p.maxWorkerPort}`,
    ];
}

/** Explicit entrypoint: images ship their own (the seeds' first failure was an entrypoint conflict). */
export const RAY_ENTRYPOINT = ["/usr/bin/env"];

export interface RayHeadCommandInput {
    node: NodeConfig;
    ports: RayPorts;
    objectStoreMemoryBytes?: number;
}

/** `ray start --head` bound to the fabric IP, every port explicit, the dashboard on loopback. */
export function rayHeadCommand(a: RayHeadCommandInput): string[] {
    const cmd = [
        "ray",
        "start",
        "--head",
        "--block",
        `--node-ip-address=${a.node.fabricIp}`,
        `--port=${a.ports.gcsPort}`,
        `--num-gpus=${a.node.gpus}`,
        `--dashboard-host=${DASHBOARD_HOST}`,
        `--dashboard-port=${a.ports.dashboardPort}`,
        `--ray-client-server-port=${a.ports.clientPort}`,
        ...nodePortFlags(a.ports),
        "--disable-usage-stats",
    ];
    if (a.objectStoreMemoryBytes !== undefined) {
        cmd.push(`--object-store-memory=${a.objectStoreMemoryBytes}`);
    }
    return cmd;
}

export interface RayWorkerCommandInput {
    node: NodeConfig;
    /** `<head fabric IP>:<gcs port>` */
    headAddress: string;
    ports: RayNodePorts;
    objectStoreMemoryBytes?: number;
}

/** `ray start` joining the head over the fabric with the worker's own fabric IP (never Ray's auto-detection). */
export function rayWorkerCommand(a: RayWorkerCommandInput): string[] {
    const cmd = [
        "ray",
        "start",
        "--block",
        `--address=${a.headAddress}`,
        `--node-ip-address=${a.node.fabricIp}`,
        `--num-gpus=${a.node.gpus}`,
        ...nodePortFlags(a.ports),
        "--disable-usage-stats",
    ];
    if (a.objectStoreMemoryBytes !== undefined) {
        cmd.push(`--object-store-memory=${a.objectStoreMemoryBytes}`);
    }
    return cmd;
}

export interface ClusterReadySpec {
    /** `<head fabric IP>:<gcs port>` */
    address: string;
    nodes: { name: string; fabricIp: string; sshHost: string }[];
    gpus: number;
    timeoutSeconds: number;
}

/** The probe (infra/scripts/ray_cluster_probe.py) run inside the head container, its spec as one JSON argument. */
export function clusterReadyStep(spec: ClusterReadySpec, headContainer: string = CONTAINER.rayHead): RemoteStep {
    return { what: "cluster readiness probe", script: "ray_cluster_probe.py", container: headContainer, args: [JSON.stringify(spec)] };
}

export function clusterReadyCommand(t: SshTarget, spec: ClusterReadySpec, headContainer: string = CONTAINER.rayHead): string {
    return remoteStepCommand(t, clusterReadyStep(spec, headContainer));
}

/** Operator hint for the loopback-only dashboard. */
export function dashboardTunnelHint(t: Pick<SshTarget, "user" | "host" | "port">, dashboardPort: number): string {
    const port = t.port === 22 ? "" : ` -p ${t.port}`;
    return `ssh -L ${dashboardPort}:${DASHBOARD_HOST}:${dashboardPort}${port} ${t.user}@${t.host}`;
}

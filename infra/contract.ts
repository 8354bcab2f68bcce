/**
 * The contract every part of the project shares: container names, the labels each project container carries, the
 * roles, and which host ports each container listens on. The program, config validation, the command builders and
 * the policy pack (a separate package) all import it, so it has no dependencies at all.
 */

/**
 * The most of a host's GPU memory vLLM may reserve (`--gpu-memory-utilization`), alone or summed over the clusters on
 * the host: on dedicated GPU memory, and on unified-memory hosts (GB10), where the OS, Ray and Docker share it. The
 * policy pack's defaults and the component's check across clusters both take these.
 */
export const GPU_MEMORY_MAX = 0.95;
export const GPU_MEMORY_MAX_UNIFIED = 0.9;

/** A cluster's container names on its hosts: `<cluster>-ray-head`, `<cluster>-ray-worker`, `<cluster>-serve`. */
export interface ContainerNames {
    rayHead: string;
    rayWorker: string;
    serve: string;
    /** With `monitoring`: Prometheus on the head. */
    prometheus: string;
    /** With `monitoring`: the node exporter on every host. */
    nodeExporter: string;
    /** With `monitoring.grafana`: Grafana on the head. */
    grafana: string;
}

/**
 * The container names of the cluster named `cluster`: one of each per host and cluster, so a second deployment of
 * the same cluster on a host fails loudly while a cluster with another name runs beside it.
 */
export function containerNames(cluster: string): ContainerNames {
    return {
        rayHead: `${cluster}-ray-head`,
        rayWorker: `${cluster}-ray-worker`,
        serve: `${cluster}-serve`,
        prometheus: `${cluster}-prometheus`,
        nodeExporter: `${cluster}-node-exporter`,
        grafana: `${cluster}-grafana`,
    };
}

export const LABEL_PREFIX = "vllm-cluster.";

/** Label keys (with the prefix). Values are strings; `ports` is a JSON object of name to host port. */
export const LABEL = {
    managed: "vllm-cluster.managed",
    stack: "vllm-cluster.stack",
    role: "vllm-cluster.role",
    node: "vllm-cluster.node",
    gpus: "vllm-cluster.gpus",
    gpuRuntime: "vllm-cluster.gpu-runtime",
    unifiedMemory: "vllm-cluster.unified-memory",
    sshPort: "vllm-cluster.ssh-port",
    ports: "vllm-cluster.ports",
    imageRef: "vllm-cluster.image-ref",
    tensorParallelSize: "vllm-cluster.tensor-parallel-size",
    pipelineParallelSize: "vllm-cluster.pipeline-parallel-size",
    clusterGpus: "vllm-cluster.cluster-gpus",
    apiKeyFile: "vllm-cluster.api-key-file",
    /** The cluster's name, on every container of a cluster not named DEFAULT_CLUSTER (whose containers have none). */
    cluster: "vllm-cluster.cluster",
    dashboardHost: "vllm-cluster.dashboard-host",
    /** Backend native only: the serve container's vLLM node rank (0 serves the API, > 0 run --headless). */
    nodeRank: "vllm-cluster.node-rank",
    /** Deploy-time values carried as labels so that a change replaces the container. */
    clusterFingerprint: "vllm-cluster.cluster-fingerprint",
    apiKeyHash: "vllm-cluster.api-key-sha256",
    tlsHash: "vllm-cluster.tls-sha256",
    rayTokenHash: "vllm-cluster.ray-token-sha256",
    headContainerId: "vllm-cluster.head-container-id",
    rank0ContainerId: "vllm-cluster.rank0-container-id",
    /** With model.source: the model's content checksum (sha256 of its manifest), so new model content replaces it. */
    modelDigest: "vllm-cluster.model-sha256",
} as const;

/** The roles of a project container: three run the model (ROLES); `monitoring` (Prometheus, node exporter) holds no GPU. */
export type Role = "ray-head" | "ray-worker" | "serve" | "monitoring";
/** The roles that run part of the model (GPU, NCCL, Ray). */
export const ROLES: readonly Role[] = ["ray-head", "ray-worker", "serve"];
export const RAY_ROLES: readonly Role[] = ["ray-head", "ray-worker"];

export type Backend = "ray" | "native";

/** The dashboard only ever listens on loopback; operators reach it through an SSH tunnel. */
export const DASHBOARD_HOST = "127.0.0.1";

/** The configured ports; any may be unknown (undefined) while an invalid config is being reported. */
export interface PortSettings {
    servePort?: number;
    gcsPort?: number;
    dashboardPort?: number;
    clientPort?: number;
    masterPort?: number;
    nodeManagerPort?: number;
    objectManagerPort?: number;
    runtimeEnvAgentPort?: number;
    dashboardAgentGrpcPort?: number;
    metricsExportPort?: number;
    dashboardAgentPort?: number;
    autoscalerMetricsPort?: number;
    dashboardMetricsPort?: number;
    prometheusPort?: number;
    nodeExporterPort?: number;
    grafanaPort?: number;
}

/**
 * The one port map: where each port setting is in the config (section and key). The schema's clash checks, the
 * containers' `ports` labels and preflight's free-port check all read the ports through it.
 */
const PORT_KEYS: Record<keyof PortSettings, [section: keyof PortSections, key: string]> = {
    servePort: ["serve", "port"],
    gcsPort: ["ray", "gcsPort"],
    dashboardPort: ["ray", "dashboardPort"],
    clientPort: ["ray", "clientPort"],
    masterPort: ["native", "masterPort"],
    nodeManagerPort: ["ray", "nodeManagerPort"],
    objectManagerPort: ["ray", "objectManagerPort"],
    runtimeEnvAgentPort: ["ray", "runtimeEnvAgentPort"],
    dashboardAgentGrpcPort: ["ray", "dashboardAgentGrpcPort"],
    metricsExportPort: ["ray", "metricsExportPort"],
    dashboardAgentPort: ["ray", "dashboardAgentPort"],
    autoscalerMetricsPort: ["ray", "autoscalerMetricsPort"],
    dashboardMetricsPort: ["ray", "dashboardMetricsPort"],
    prometheusPort: ["monitoring", "port"],
    nodeExporterPort: ["monitoring", "nodeExporterPort"],
    grafanaPort: ["monitoring", "grafana.port"],
};

/** A config's sections as portSettingsOf reads them; a section or port may be missing while a config is judged. */
export interface PortSections {
    serve?: object;
    ray?: object;
    native?: object;
    monitoring?: object;
}

/** The ports a config sets (a valid config sets every one; a config being judged may leave some undefined). */
export function portSettingsOf(config: PortSections): PortSettings {
    const out: PortSettings = {};
    for (const [setting, [section, key]] of Object.entries(PORT_KEYS) as [keyof PortSettings, [keyof PortSections, string]][]) {
        // a key may be in a subsection (`grafana.port`): unset while the subsection is
        let port: unknown = config[section];
        for (const k of key.split(".")) port = (port as Record<string, unknown> | undefined)?.[k];
        if (typeof port === "number") out[setting] = port;
    }
    return out;
}

/** What every Ray node listens on, head and workers alike (`ray start` pins each; see ray.nodeManagerPort). */
const RAY_NODE_PORTS: [name: string, setting: keyof PortSettings][] = [
    ["raylet", "nodeManagerPort"],
    ["object-manager", "objectManagerPort"],
    ["runtime-env-agent", "runtimeEnvAgentPort"],
    ["dashboard-agent-grpc", "dashboardAgentGrpcPort"],
    ["metrics", "metricsExportPort"],
    ["dashboard-agent", "dashboardAgentPort"],
];

/** One host port a container listens on: its name in the `ports` label, the config key that sets it, the port. */
export interface PortClaim {
    name: string;
    key: string;
    port: number;
}

/** Which container of a backend: the Ray head, a Ray worker, serve next to the Ray head, or a native rank. */
export type ContainerKind =
    "ray-head" | "ray-worker" | "ray-serve" | "native-rank0" | "native-headless" | "prometheus" | "node-exporter" | "grafana";

const PORTS_OF: Record<ContainerKind, [name: string, setting: keyof PortSettings][]> = {
    "ray-head": [
        ["gcs", "gcsPort"],
        ["dashboard", "dashboardPort"],
        ["client", "clientPort"],
        ["autoscaler-metrics", "autoscalerMetricsPort"],
        ["dashboard-metrics", "dashboardMetricsPort"],
        ...RAY_NODE_PORTS,
    ],
    // a worker dials the head, and listens on the node ports (its worker processes in ray.minWorkerPort..maxWorkerPort)
    "ray-worker": RAY_NODE_PORTS,
    "ray-serve": [["serve", "servePort"]],
    "native-rank0": [
        ["serve", "servePort"],
        ["master", "masterPort"],
    ],
    // headless ranks only dial rank 0
    "native-headless": [],
    prometheus: [["prometheus", "prometheusPort"]],
    "node-exporter": [["node-exporter", "nodeExporterPort"]],
    // claimed only with monitoring.grafana (its port is unset without it)
    grafana: [["grafana", "grafanaPort"]],
};

/** The host ports one container listens on (all containers use host networking). */
export function containerPorts(kind: ContainerKind, p: PortSettings): PortClaim[] {
    const out: PortClaim[] = [];
    for (const [name, setting] of PORTS_OF[kind]) {
        const port = p[setting];
        if (port !== undefined) {
            out.push({ name, key: PORT_KEYS[setting].join("."), port });
        }
    }
    return out;
}

/**
 * The containers a backend runs on the head host and on every other host; with `monitoring`, a node exporter on
 * every host and Prometheus on the head as well.
 */
export function nodeContainers(backend: Backend, isHead: boolean, monitoring = false): ContainerKind[] {
    const extra: ContainerKind[] = monitoring ? (isHead ? ["prometheus", "grafana", "node-exporter"] : ["node-exporter"]) : [];
    if (backend === "native") {
        return [isHead ? "native-rank0" : "native-headless", ...extra];
    }
    return [...(isHead ? (["ray-head", "ray-serve"] as const) : (["ray-worker"] as const)), ...extra];
}

/** Every host port the project's containers listen on on one host (`monitoring`: the monitoring section is set). */
export function nodePorts(backend: Backend, isHead: boolean, p: PortSettings, monitoring = false): PortClaim[] {
    return nodeContainers(backend, isHead, monitoring).flatMap((kind) => containerPorts(kind, p));
}

/** The `ports` label value of a container: name -> port. */
export function portsLabel(claims: readonly PortClaim[]): Record<string, number> {
    return Object.fromEntries(claims.map((c) => [c.name, c.port]));
}

/** Distinct ports, sorted. */
export function portNumbers(claims: readonly PortClaim[]): number[] {
    return [...new Set(claims.map((c) => c.port))].sort((a, b) => a - b);
}

/** The stack program's cluster: the VllmCluster it makes is named so (infra/index.ts). */
export const DEFAULT_CLUSTER = "vllm";

/**
 * What a cluster's Pulumi children's names start with: nothing for DEFAULT_CLUSTER (the names every release gave
 * them, so its stacks keep their URNs), `<cluster>-` for any other, so two clusters in one program never share a URN.
 */
export function clusterPrefix(cluster: string): string {
    return cluster === DEFAULT_CLUSTER ? "" : `${cluster}-`;
}

/** The container names of the stack program's cluster (DEFAULT_CLUSTER), as every release has named them. */
export const CONTAINER: ContainerNames = containerNames(DEFAULT_CLUSTER);

/** A VllmCluster's name: lower-case letters, digits and dashes, starting with a letter (it will name containers). */
export const CLUSTER_NAME_RE = /^[a-z][a-z0-9-]{0,30}[a-z0-9]$/;

/** The host ports each node's containers listen on, from the config: what preflight checks are free. */
import type { ClusterConfig, NodeConfig } from "../config";
import { PortSettings, nodePorts, portNumbers } from "../contract";

/** The configured ports, as the contract's per-host port map takes them. */
export function portSettings(cfg: ClusterConfig): Required<PortSettings> {
    return {
        servePort: cfg.serve.port,
        gcsPort: cfg.ray.gcsPort,
        dashboardPort: cfg.ray.dashboardPort,
        clientPort: cfg.ray.clientPort,
        masterPort: cfg.native.masterPort,
        nodeManagerPort: cfg.ray.nodeManagerPort,
        objectManagerPort: cfg.ray.objectManagerPort,
        runtimeEnvAgentPort: cfg.ray.runtimeEnvAgentPort,
        dashboardAgentGrpcPort: cfg.ray.dashboardAgentGrpcPort,
        metricsExportPort: cfg.ray.metricsExportPort,
        dashboardAgentPort: cfg.ray.dashboardAgentPort,
        autoscalerMetricsPort: cfg.ray.autoscalerMetricsPort,
        dashboardMetricsPort: cfg.ray.dashboardMetricsPort,
    };
}

/** The host ports the backend's containers will listen on on `node`: preflight fails if another process holds one. */
export function nodeListenPorts(cfg: ClusterConfig, node: NodeConfig): number[] {
    return portNumbers(nodePorts(cfg.backend, node.name === cfg.head.name, portSettings(cfg)));
}

/** The host ports each node's containers listen on, from the config: what preflight checks are free. */
import type { ClusterConfig, NodeConfig } from "../config";
import { PortSettings, nodePorts, portNumbers, portSettingsOf } from "../contract";

/** The configured ports, as the contract's per-host port map takes them (a valid config sets every one). */
export function portSettings(cfg: ClusterConfig): Required<PortSettings> {
    return portSettingsOf(cfg) as Required<PortSettings>;
}

/** The host ports the backend's containers will listen on on `node`: preflight fails if another process holds one. */
export function nodeListenPorts(cfg: ClusterConfig, node: NodeConfig): number[] {
    return portNumbers(nodePorts(cfg.backend, node.name === cfg.head.name, portSettings(cfg)));
}

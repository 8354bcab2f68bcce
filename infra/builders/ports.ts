/** The host ports each node's containers listen on, from the config: what preflight checks are free. */
import type { ClusterConfig, NodeConfig } from "../config";
import { nodePorts, portNumbers, portSettingsOf } from "../contract";

/** The host ports the backend's containers will listen on on `node`: preflight fails if another process holds one. */
export function nodeListenPorts(cfg: ClusterConfig, node: NodeConfig): number[] {
    return portNumbers(nodePorts(cfg.backend, node.name === cfg.head.name, portSettingsOf(cfg), cfg.monitoring !== undefined));
}

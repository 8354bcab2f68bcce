/**
 * Where the hosts of a chain copy (image, model) reach each other: the fabric (distribution.network: fabric, the
 * default) or the management network, and which hosts each one may forward a copy to, for its preflight.
 */
import type { ClusterConfig, NodeConfig } from "../config";
import type { PreflightPeer } from "./preflight";

/** The address the host before `n` in a chain dials for it: its fabric IP, or its sshHost. */
export function peerHost(cfg: Pick<ClusterConfig, "distribution">, n: NodeConfig): string {
    return cfg.distribution.network === "fabric" ? n.fabricIp : n.sshHost;
}

/** Whether hosts copy to each other at all: an image chain from a host or the operator, or a model source. */
export function hostsCopyToEachOther(cfg: Pick<ClusterConfig, "nodes" | "image" | "model">): boolean {
    const imageChain = cfg.image.distribution === "chain" && cfg.image.source !== "registry";
    return cfg.nodes.length > 1 && (imageChain || cfg.model.source !== undefined);
}

/**
 * The hosts `n` may forward a chain copy to, at the address it will dial: every other node (a chain skips the hosts
 * that already hold the copy, so any later host can be next), or none when no chain runs.
 */
export function chainPeers(cfg: Pick<ClusterConfig, "nodes" | "image" | "model" | "distribution">, n: NodeConfig): PreflightPeer[] {
    if (!hostsCopyToEachOther(cfg)) return [];
    return cfg.nodes
        .filter((p) => p.name !== n.name)
        .map((p) => ({ node: p.name, host: peerHost(cfg, p), port: p.sshPort, network: cfg.distribution.network }));
}

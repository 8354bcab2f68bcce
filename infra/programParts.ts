/**
 * The parts of a cluster's graph that both backends share: each host (its SSH target, Docker provider and preflight),
 * the roster of hosts, and the image and model on every host. infra/program.ts wires them to the backend's parts.
 */
import * as pulumi from "@pulumi/pulumi";
import { ImageDistribution } from "../components/imageDistribution";
import { ModelDistribution } from "../components/modelDistribution";
import { SparkNode } from "../components/sparkNode";
import type { PortOwner } from "./builders/preflight";
import { hubEndpoint } from "./builders/hub";
import { clusterContainersRemoveStep } from "./builders/node";
import { chainPeers, peerHost } from "./builders/peers";
import { nodeListenPorts } from "./builders/ports";
import { remoteStepCommand } from "./builders/remoteStep";
import { sshTargetOf } from "./builders/ssh";
import { ClusterConfig, NodeConfig, SecretConfig } from "./config";
import type { ContainerInput } from "./builders/containers";
import { clusterPrefix } from "./contract";
import { resolveBuild } from "./imageBuild";
import { Roster } from "./providers/roster";
import type { ServeTls } from "./tls";

/** serve.tls and the files read for it go together (loadTls reads them when the program starts). */
export function tlsMatchesConfig(cfg: ClusterConfig, tls: ServeTls): void {
    if ((cfg.serve.tls === undefined) !== (tls === undefined)) {
        const why = cfg.serve.tls ? "set but its files were not read (loadTls)" : "unset but TLS files were given";
        throw new Error(`buildCluster: serve.tls is ${why}`);
    }
}

/**
 * Where the cluster's top-level parts go: under `parent` (a VllmCluster), each with an alias to its URN as a child of
 * the stack, where the stack program made them before the component existed, so a stack deployed then upgrades in
 * place (nothing replaced); at the top level of the stack without a parent (the unit tests' graph).
 */
export type Placement = pulumi.ComponentResourceOptions;

export function placement(parent: pulumi.ComponentResource | undefined): Placement {
    return parent === undefined ? {} : { parent, aliases: [{ parent: pulumi.rootStackResource }] };
}

/** One SparkNode per configured node, by name: its SSH target, state directory and the ports preflight checks. */
export function sparkNodes(cfg: ClusterConfig, prefix: string, at: Placement, owner?: PortOwner): Map<string, SparkNode> {
    const hosts = new Map<string, SparkNode>();
    for (const node of cfg.nodes) {
        const ssh = sshTargetOf(node, cfg.ssh);
        const ports = nodeListenPorts(cfg, node);
        const peers = chainPeers(cfg, node);
        hosts.set(
            node.name,
            new SparkNode(
                `${prefix}${node.name}`,
                {
                    node,
                    ssh,
                    stateDir: cfg.stateDir,
                    ports,
                    peerHost: peerHost(cfg, node),
                    peers,
                    modelDir: cfg.model.hostPath,
                    owner,
                },
                at,
            ),
        );
    }
    return hosts;
}

/** The Roster: which hosts are in the stack; a host that left it is cleared of the stack's containers first. */
export function stackRoster(cfg: ClusterConfig, stack: string, cluster: string, host: (name: string) => SparkNode, at: Placement): Roster {
    return new Roster(
        `${clusterPrefix(cluster)}roster`,
        {
            members: cfg.nodes.map((n) => ({
                name: n.name,
                evictScript: remoteStepCommand(host(n.name).ssh, clusterContainersRemoveStep(n.name, stack, cluster)),
            })),
        },
        at,
    );
}

/** The image on every host: copied from the source along the hops the distribution settings choose. */
export function imageDistribution(
    cfg: ClusterConfig,
    prefix: string,
    nodes: SparkNode[],
    after: pulumi.Resource[],
    at: Placement,
): ImageDistribution {
    const build = cfg.image.build && resolveBuild(cfg.image.build);
    return new ImageDistribution(`${prefix}image`, { ...cfg.image, build, layers: cfg.distribution.imageLayers, nodes, after }, at);
}

/**
 * The model copied from model.source to every other host (downloaded there first with model.hub, in that host's
 * image); undefined when the model is already in place everywhere.
 */
export function modelDistribution(
    cfg: ClusterConfig,
    prefix: string,
    nodes: SparkNode[],
    image: ImageDistribution,
    after: pulumi.Resource[],
    at: Placement,
    hfToken?: pulumi.Output<string>,
): ModelDistribution | undefined {
    const source = cfg.model.source;
    if (!source) return undefined;
    const hub = cfg.model.hub;
    const endpoint = hub && hubEndpoint(hub.endpoint);
    if (endpoint?.startsWith("http://") && hfToken) {
        void pulumi.log.warn(`model.hub.endpoint ${endpoint} is plain http: hfToken crosses the network to it in clear; use https`);
    }
    return new ModelDistribution(
        `${prefix}model`,
        {
            hostPath: cfg.model.hostPath,
            sourceNode: source,
            nodes,
            streams: cfg.distribution.modelStreams,
            after,
            hub: hub && { ...hub, endpoint: endpoint!, image: image.imageIds[source], token: hfToken },
        },
        at,
    );
}

/** What every container on a node takes from the config, the image ID on that host and (with model.source) the model's digest. */
export function containerInputs(
    cfg: ClusterConfig,
    of: { stack: string; cluster: string; secrets: SecretConfig },
    image: ImageDistribution,
    model: ModelDistribution | undefined,
    host: (name: string) => SparkNode,
): (node: NodeConfig) => ContainerInput {
    return (node) => ({
        ...of,
        node,
        imageId: image.imageIds[node.name],
        imageRef: cfg.image.ref,
        model: cfg.model,
        modelDigest: model?.digest,
        serve: cfg.serve,
        ray: cfg.ray,
        stateDir: cfg.stateDir,
        memoryGuard: cfg.memoryGuard,
        hostMemory: host(node.name).facts,
    });
}

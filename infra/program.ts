import * as pulumi from "@pulumi/pulumi";
import { ImageDistribution } from "../components/imageDistribution";
import { hubEndpoint } from "./builders/hub";
import { resolveBuild } from "./imageBuild";
import { ModelDistribution } from "../components/modelDistribution";
import { RayHead } from "../components/rayHead";
import { RayWorker } from "../components/rayWorker";
import { ServeContainer, ServeEndpoint } from "../components/serveEndpoint";
import { SparkNode } from "../components/sparkNode";
import { ContainerInput } from "./builders/containers";
import { dashboardTunnelHint } from "./builders/ray";
import { nativeRankContainerArgs, serveContainerArgs } from "./builders/serveContainers";
import { remoteStepCommand } from "./builders/remoteStep";
import { sshTargetOf } from "./builders/ssh";
import { chainPeers, peerHost } from "./builders/peers";
import { joinFingerprint } from "./builders/vllm";
import { Roster } from "./providers/roster";
import { stackContainersRemoveStep } from "./builders/node";
import { ClusterConfig, NO_SECRET_CONFIG, NodeConfig, SecretConfig } from "./config";
import { nodeListenPorts } from "./builders/ports";
import type { ServeTls } from "./tls";

export interface ClusterOutputs {
    endpoint: pulumi.Output<string>;
    servedModelName: string;
    apiKey: pulumi.Output<string>;
    /** ssh tunnel hint to the Ray dashboard; for backend native, a note that there is none. */
    rayDashboard: string;
    nodes: { name: string; role: string; sshHost: string; fabricIp: string; gpus: number }[];
    clusterFingerprint: pulumi.Output<string>;
    /** model.hub: the commit the model was downloaded at. */
    modelCommit?: pulumi.Output<string>;
}

/** serve.tls and the files read for it go together (loadTls reads them when the program starts). */
function tlsMatchesConfig(cfg: ClusterConfig, tls: ServeTls): void {
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

function placement(parent: pulumi.ComponentResource | undefined): Placement {
    return parent === undefined ? {} : { parent, aliases: [{ parent: pulumi.rootStackResource }] };
}

/** One SparkNode per configured node, by name: its SSH target, state directory and the ports preflight checks. */
function sparkNodes(cfg: ClusterConfig, at: Placement): Map<string, SparkNode> {
    const hosts = new Map<string, SparkNode>();
    for (const node of cfg.nodes) {
        const ssh = sshTargetOf(node, cfg.ssh);
        const ports = nodeListenPorts(cfg, node);
        const peers = chainPeers(cfg, node);
        hosts.set(
            node.name,
            new SparkNode(
                node.name,
                {
                    node,
                    ssh,
                    stateDir: cfg.stateDir,
                    ports,
                    peerHost: peerHost(cfg, node),
                    peers,
                    modelDir: cfg.model.hostPath,
                },
                at,
            ),
        );
    }
    return hosts;
}

/** The Roster: which hosts are in the stack; a host that left it is cleared of the stack's containers first. */
function stackRoster(cfg: ClusterConfig, stack: string, host: (name: string) => SparkNode, at: Placement): Roster {
    return new Roster(
        "roster",
        {
            members: cfg.nodes.map((n) => ({
                name: n.name,
                evictScript: remoteStepCommand(host(n.name).ssh, stackContainersRemoveStep(n.name, stack)),
            })),
        },
        at,
    );
}

/** What both backends' graphs take: the config, the hosts, the API key and how to build a container's input. */
interface GraphContext {
    cfg: ClusterConfig;
    roster: Roster;
    host: (name: string) => SparkNode;
    head: SparkNode;
    /** What every container on `node` takes from the config, and the image ID on that host. */
    input: (node: NodeConfig) => ContainerInput;
    endpoint: (containers: ServeContainer[]) => ServeEndpoint;
    /** Which free-form values came from secret config. */
    secrets: SecretConfig;
    /** Where the top-level parts go (placement). */
    at: Placement;
}

type BackendOutputs = Pick<ClusterOutputs, "endpoint" | "apiKey" | "rayDashboard" | "clusterFingerprint">;

/** The image on every host: copied from the source along the hops the distribution settings choose. */
function imageDistribution(cfg: ClusterConfig, nodes: SparkNode[], after: pulumi.Resource[], at: Placement): ImageDistribution {
    const build = cfg.image.build && resolveBuild(cfg.image.build);
    return new ImageDistribution("image", { ...cfg.image, build, layers: cfg.distribution.imageLayers, nodes, after }, at);
}

/**
 * The model copied from model.source to every other host (downloaded there first with model.hub, in that host's
 * image); undefined when the model is already in place everywhere.
 */
function modelDistribution(
    cfg: ClusterConfig,
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
        "model",
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

/**
 * Builds the whole resource graph from a validated config (`secrets`: which free-form values came from secret config,
 * so they stay secret in the state and every diff; `tls`: the files serve.tls names, read by loadTls). Ordering
 * comes from data: image IDs (and with model.source the model's digest) into containers, the head's address into
 * workers, container IDs into the gate, its fingerprint and the files' hashes into serve. `parent`: the VllmCluster
 * that owns the graph (placement).
 */
export function buildCluster(
    cfg: ClusterConfig,
    stack: string,
    secrets: SecretConfig = NO_SECRET_CONFIG,
    tls: ServeTls = undefined,
    hfToken?: pulumi.Output<string>,
    parent?: pulumi.ComponentResource,
): ClusterOutputs {
    tlsMatchesConfig(cfg, tls);
    const at = placement(parent);
    const hosts = sparkNodes(cfg, at);
    const host = (name: string): SparkNode => hosts.get(name)!;
    const head = host(cfg.head.name);

    // No copy starts before every host's preflight has passed: a failed one ends `up` in seconds, whatever the image.
    const preflights = [...hosts.values()].map((h) => h.preflight);
    const image = imageDistribution(cfg, [...hosts.values()], preflights, at);
    const model = modelDistribution(cfg, [...hosts.values()], image, preflights, at, hfToken);
    const roster = stackRoster(cfg, stack, host, at);
    const ctx: GraphContext = {
        cfg,
        at,
        secrets,
        roster,
        host,
        head,
        input: (node) => ({
            stack,
            node,
            imageId: image.imageIds[node.name],
            imageRef: cfg.image.ref,
            model: cfg.model,
            modelDigest: model?.digest,
            serve: cfg.serve,
            ray: cfg.ray,
            stateDir: cfg.stateDir,
            secrets,
            memoryGuard: cfg.memoryGuard,
            hostMemory: host(node.name).facts,
        }),
        endpoint: (containers) =>
            new ServeEndpoint(
                "serve",
                {
                    head,
                    tls,
                    stateDir: cfg.stateDir,
                    serve: cfg.serve,
                    model: cfg.model,
                    containers,
                    after: [roster],
                },
                at,
            ),
    };
    return {
        servedModelName: cfg.model.servedName,
        modelCommit: model?.hubCommit,
        nodes: cfg.nodes.map((n) => ({ name: n.name, role: n.role, sshHost: n.sshHost, fabricIp: n.fabricIp, gpus: n.gpus })),
        ...(cfg.backend === "native" ? buildNative(ctx) : buildRay(ctx)),
    };
}

/** vLLM's own multi-node: no Ray containers and no Ray probe; rank 0's readiness check is the gate. */
function buildNative({ cfg, host, input, endpoint, secrets }: GraphContext): BackendOutputs {
    const ranks = [cfg.head, ...cfg.workers];
    const serve = endpoint(
        ranks.map((node, nodeRank) => ({
            name: `serve-rank-${nodeRank}-container`,
            host: host(node.name),
            secretArgs: secretServeArgs(cfg, secrets),
            args: (files, earlier) =>
                nativeRankContainerArgs({
                    ...input(node),
                    rank: { nodeRank, nnodes: ranks.length, masterAddr: cfg.head.fabricIp, masterPort: cfg.native.masterPort },
                    clusterGpus: cfg.totalGpus,
                    ...(nodeRank === 0 ? files : {}),
                    rank0ContainerId: nodeRank > 0 ? earlier[0] : undefined,
                }),
        })),
    );
    return {
        endpoint: serve.endpoint,
        apiKey: serve.apiKey,
        rayDashboard: "none (backend native runs no Ray)",
        clusterFingerprint: pulumi.all(serve.containers.map((c) => c.id)).apply(joinFingerprint),
    };
}

/** Whether the serve command carries values from secret config (serve.extraArgs set with --secret). */
function secretServeArgs(cfg: ClusterConfig, secrets: SecretConfig): boolean {
    return secrets.serveArgs && cfg.serve.extraArgs.length > 0;
}

/** Every node as the Ray cluster's probe expects it: its name, fabric IP and (for messages) its management address. */
function rayNodes(cfg: ClusterConfig): { name: string; fabricIp: string; sshHost: string }[] {
    return cfg.nodes.map((n) => ({ name: n.name, fabricIp: n.fabricIp, sshHost: n.sshHost }));
}

/** Ray head, a worker per other host, the gate that waits for all of them on their fabric IPs, serve on the head. */
function buildRay(ctx: GraphContext): BackendOutputs {
    const { cfg, host, head, endpoint, input, secrets, at } = ctx;
    const ray = { objectStoreMemoryBytes: cfg.ray.objectStoreMemoryBytes, ports: cfg.ray };
    const rayHead = new RayHead("ray-head", { ...input(cfg.head), ...ray, host: head, auth: cfg.ray.auth }, at);
    const workers = cfg.workers.map(
        (w) => new RayWorker(`ray-worker-${w.name}`, { ...input(w), ...ray, host: host(w.name), head: rayHead }, at),
    );
    const ready = rayHead.ready(workers, {
        nodes: rayNodes(cfg),
        gpus: cfg.totalGpus,
        timeoutSeconds: cfg.ray.readyTimeoutSeconds,
        roster: ctx.roster.version,
    });
    const serve = endpoint([
        {
            name: "serve-container",
            host: head,
            secretArgs: secretServeArgs(cfg, secrets),
            args: (files) =>
                serveContainerArgs({
                    ...input(cfg.head),
                    rayTokenHash: rayHead.tokenHash,
                    ...files,
                    rayAddress: rayHead.address,
                    clusterFingerprint: ready.fingerprint,
                    clusterGpus: cfg.totalGpus,
                    rayNodes: rayNodes(cfg),
                }),
        },
    ]);
    return {
        endpoint: serve.endpoint,
        apiKey: serve.apiKey,
        rayDashboard: dashboardTunnelHint(head.ssh, cfg.ray.dashboardPort),
        clusterFingerprint: ready.fingerprint,
    };
}

import * as pulumi from "@pulumi/pulumi";
import { Monitoring } from "../components/monitoring";
import { RayHead } from "../components/rayHead";
import { RayWorker } from "../components/rayWorker";
import { NativeServe, RayServe, ServeEndpoint } from "../components/serveEndpoint";
import { SparkNode } from "../components/sparkNode";
import { ContainerInput } from "./builders/containers";
import { clusterStateDir } from "./builders/node";
import { dashboardTunnelHint } from "./builders/ray";
import { joinFingerprint } from "./builders/vllm";
import type { LaunchTimings } from "./builders/readiness";
import type { StatusSpec } from "./builders/status";
import { describedOutputs } from "./builders/statusSpec";
import { ClusterConfig, NO_SECRET_CONFIG, NodeConfig, SecretConfig } from "./config";
import { DEFAULT_CLUSTER, clusterPrefix } from "./contract";
import {
    Placement,
    containerInputs,
    imageDistribution,
    modelDistribution,
    placement,
    sparkNodes,
    stackRoster,
    tlsMatchesConfig,
} from "./programParts";
import { Roster } from "./providers/roster";
import type { ServeTls } from "./tls";

export type { Placement } from "./programParts";

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
    /** Where `npm run status` looks (names, paths, ports; no secret). */
    status: StatusSpec;
    /** What the server's last start took (its readiness wait's figures). */
    launch: pulumi.Output<LaunchTimings>;
    /** The serve watchdog's last restart of the running server; "none". */
    watchdog: pulumi.Output<string>;
    /** How to reach Prometheus (monitoring), or that none runs. */
    monitoring: string;
    /** monitoring.grafana: Grafana's admin password (a secret). */
    grafanaAdminPassword?: pulumi.Output<string>;
}

/** What both backends' graphs take: the config, the hosts, the API key and how to build a container's input. */
interface GraphContext {
    cfg: ClusterConfig;
    roster: Roster;
    host: (name: string) => SparkNode;
    head: SparkNode;
    /** What every container on `node` takes from the config, and the image ID on that host. */
    input: (node: NodeConfig) => ContainerInput;
    /** The server on `ranks` (the head first), reached through `backend`. */
    endpoint: (ranks: NodeConfig[], backend: RayServe | NativeServe) => ServeEndpoint;
    /** Where the top-level parts go (placement). */
    at: Placement;
    /** What the top-level parts' names start with (clusterPrefix). */
    prefix: string;
}

type BackendOutputs = Pick<ClusterOutputs, "endpoint" | "apiKey" | "rayDashboard" | "clusterFingerprint" | "launch" | "watchdog"> & {
    /** The serve component: what Prometheus starts after. */
    serve: ServeEndpoint;
};

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
    cluster: string = DEFAULT_CLUSTER,
): ClusterOutputs {
    tlsMatchesConfig(cfg, tls);
    // Another cluster's state on the same hosts lives in a directory of its own (clusterStateDir)
    cfg = { ...cfg, stateDir: clusterStateDir(cfg.stateDir, cluster) };
    const prefix = clusterPrefix(cluster);
    const at = placement(parent);
    const hosts = sparkNodes(cfg, prefix, at, { stack, cluster });
    const host = (name: string): SparkNode => hosts.get(name)!;
    const head = host(cfg.head.name);

    // No copy starts before every host's preflight has passed: a failed one ends `up` in seconds, whatever the image.
    const preflights = [...hosts.values()].map((h) => h.preflight);
    const image = imageDistribution(cfg, prefix, [...hosts.values()], preflights, at);
    const model = modelDistribution(cfg, prefix, [...hosts.values()], image, preflights, at, hfToken);
    const roster = stackRoster(cfg, stack, cluster, host, at);
    const input = containerInputs(cfg, { stack, cluster, secrets }, image, model, host);
    const ctx: GraphContext = {
        cfg,
        at,
        roster,
        host,
        head,
        prefix,
        input,
        endpoint: (ranks, backend) =>
            new ServeEndpoint(
                `${prefix}serve`,
                {
                    cluster,
                    head,
                    tls,
                    stateDir: cfg.stateDir,
                    serve: cfg.serve,
                    model: cfg.model,
                    ranks: ranks.map((node) => ({ host: host(node.name), input: input(node) })),
                    backend,
                    clusterGpus: cfg.totalGpus,
                    secretArgs: secretServeArgs(cfg, secrets),
                    after: [roster],
                },
                at,
            ),
    };
    const { serve, ...backend } = cfg.backend === "native" ? buildNative(ctx) : buildRay(ctx);
    const nodes = [...hosts.values()];
    const monitoring =
        cfg.monitoring && new Monitoring(`${prefix}monitoring`, { cfg, stack, cluster, nodes, after: [serve], serveCert: tls?.cert }, at);
    return {
        ...describedOutputs(cfg, stack, cluster),
        modelCommit: model?.hubCommit,
        ...backend,
        monitoring: monitoring ? monitoring.prometheus : "none (monitoring is not set)",
        grafanaAdminPassword: monitoring?.grafanaAdminPassword,
    };
}

/** vLLM's own multi-node: no Ray containers and no Ray probe; rank 0's readiness check is the gate. */
function buildNative({ cfg, endpoint }: GraphContext): BackendOutputs {
    const serve = endpoint([cfg.head, ...cfg.workers], {
        kind: "native",
        masterAddr: cfg.head.fabricIp,
        masterPort: cfg.native.masterPort,
    });
    return {
        serve,
        endpoint: serve.endpoint,
        apiKey: serve.apiKey,
        launch: serve.launch,
        watchdog: serve.watchdog,
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
    const { cfg, host, head, endpoint, input, at } = ctx;
    const ray = { objectStoreMemoryBytes: cfg.ray.objectStoreMemoryBytes, ports: cfg.ray };
    const rayHead = new RayHead(`${ctx.prefix}ray-head`, { ...input(cfg.head), ...ray, host: head, auth: cfg.ray.auth }, at);
    const workers = cfg.workers.map(
        (w) => new RayWorker(`${ctx.prefix}ray-worker-${w.name}`, { ...input(w), ...ray, host: host(w.name), head: rayHead }, at),
    );
    const ready = rayHead.ready(workers, {
        nodes: rayNodes(cfg),
        gpus: cfg.totalGpus,
        timeoutSeconds: cfg.ray.readyTimeoutSeconds,
        roster: ctx.roster.version,
    });
    const serve = endpoint([cfg.head], { kind: "ray", rayHead, fingerprint: ready.fingerprint, nodes: rayNodes(cfg) });
    return {
        serve,
        endpoint: serve.endpoint,
        apiKey: serve.apiKey,
        launch: serve.launch,
        watchdog: serve.watchdog,
        rayDashboard: dashboardTunnelHint(head.ssh, cfg.ray.dashboardPort),
        clusterFingerprint: ready.fingerprint,
    };
}

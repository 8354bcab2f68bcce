import * as pulumi from "@pulumi/pulumi";
import * as random from "@pulumi/random";
import { ClusterReady } from "../components/clusterReady";
import { ClusterReadySpec, SshTarget, dashboardTunnelHint, rayHeadPortsLabel, sshTargetOf } from "../components/commands";
import {
    RayHeadContainerParams,
    RayWorkerContainerParams,
    ServeContainerParams,
    listenPorts,
    nativeServePorts,
    rayWorkerPorts,
    servePorts,
} from "../components/containerArgs";
import { ImageDistribution } from "../components/imageDistribution";
import { NativeRankParams, VllmNativeServe } from "../components/nativeServe";
import { RayHead } from "../components/rayHead";
import { RayWorker } from "../components/rayWorker";
import { SparkNode } from "../components/sparkNode";
import { VllmServe } from "../components/vllmServe";
import { ClusterConfig, NodeConfig } from "./config";

export interface ClusterOutputs {
    endpoint: pulumi.Output<string>;
    servedModelName: string;
    apiKey: pulumi.Output<string>;
    /** ssh tunnel hint to the Ray dashboard; for backend native, a note that there is none. */
    rayDashboard: string;
    nodes: { name: string; role: string; sshHost: string; fabricIp: string; gpus: number }[];
    clusterFingerprint: pulumi.Output<string>;
}

/**
 * Everything the graph takes from the config, as plain values per step; only the values a step learns at deploy
 * time (image IDs, the head's address and container ID, the cluster fingerprint, the API key) are left out.
 * buildCluster wires these through Outputs; anything else that runs the same steps uses the same plan.
 */
export interface ClusterPlan {
    stack: string;
    backend: ClusterConfig["backend"];
    /**
     * Every host with the host ports its containers will listen on (from the same port maps as their
     * `vllm-cluster.ports` labels): preflight fails if another process already holds one.
     */
    nodes: { node: NodeConfig; ssh: SshTarget; ports: number[] }[];
    stateDir: string;
    image: { ref: string; source: ClusterConfig["image"]["source"]; sourceNode?: string };
    rayHead: Omit<RayHeadContainerParams, "imageId">;
    /** The head's `<fabric IP>:<gcs port>` (the graph hands it on only once the head container exists). */
    headAddress: string;
    workers: Omit<RayWorkerContainerParams, "imageId" | "headAddress" | "headContainerId">[];
    clusterReady: Omit<ClusterReadySpec, "address">;
    serve: Omit<ServeContainerParams, "imageId" | "rayAddress" | "clusterFingerprint" | "apiKeyHash"> & { readyTimeoutSeconds: number };
    /**
     * Backend native: one rank per node, rank 0 on the head then the others in config order; empty for backend
     * ray. (The Ray parts above are plain data for either backend; only backend ray deploys them.)
     */
    native: NativeRankParams[];
    /** Length of the generated API key (letters and digits). */
    apiKeyLength: number;
}

export function planCluster(cfg: ClusterConfig, stack: string): ClusterPlan {
    const common = {
        imageRef: cfg.image.ref,
        stack,
        model: { hostPath: cfg.model.hostPath, containerPath: cfg.model.containerPath },
        shmSize: cfg.serve.shmSize,
        maxRestarts: cfg.serve.maxRestarts,
    };
    const ports = { gcsPort: cfg.ray.gcsPort, dashboardPort: cfg.ray.dashboardPort, clientPort: cfg.ray.clientPort };
    const serveSpec = {
        modelContainerPath: cfg.model.containerPath,
        servedName: cfg.model.servedName,
        host: cfg.serve.host,
        port: cfg.serve.port,
        tensorParallelSize: cfg.serve.tensorParallelSize,
        pipelineParallelSize: cfg.serve.pipelineParallelSize,
        gpuMemoryUtilization: cfg.serve.gpuMemoryUtilization,
        maxModelLen: cfg.serve.maxModelLen,
        reasoningParser: cfg.serve.reasoningParser,
        toolCallParser: cfg.serve.toolCallParser,
        enableAutoToolChoice: cfg.serve.enableAutoToolChoice,
        trustRemoteCode: cfg.serve.trustRemoteCode,
        loadFormat: cfg.serve.loadFormat,
        extraArgs: cfg.serve.extraArgs,
    };
    const rankOrder = [cfg.head, ...cfg.workers];
    const native =
        cfg.backend === "native"
            ? rankOrder.map((node, nodeRank) => ({
                  ...common,
                  node,
                  serve: serveSpec,
                  stateDir: cfg.stateDir,
                  clusterGpus: cfg.totalGpus,
                  rank: { nodeRank, nnodes: rankOrder.length, masterAddr: cfg.head.fabricIp, masterPort: cfg.native.masterPort },
              }))
            : [];
    // Per host, the port maps of the containers this backend puts there (the same maps their labels carry).
    const portsOf = (n: NodeConfig): number[] => {
        if (cfg.backend === "native") {
            return listenPorts(...native.filter((r) => r.node.name === n.name).map((r) => nativeServePorts(r)));
        }
        return n.name === cfg.head.name
            ? listenPorts(rayHeadPortsLabel(ports), servePorts({ serve: serveSpec }))
            : listenPorts(rayWorkerPorts());
    };
    return {
        stack,
        backend: cfg.backend,
        nodes: cfg.nodes.map((n) => ({ node: n, ssh: sshTargetOf(n, cfg.ssh), ports: portsOf(n) })),
        stateDir: cfg.stateDir,
        image: { ref: cfg.image.ref, source: cfg.image.source, sourceNode: cfg.image.sourceNode },
        rayHead: { ...common, node: cfg.head, ports, objectStoreMemoryBytes: cfg.ray.objectStoreMemoryBytes, stateDir: cfg.stateDir },
        headAddress: `${cfg.head.fabricIp}:${cfg.ray.gcsPort}`,
        workers: cfg.workers.map((w) => ({ ...common, node: w, objectStoreMemoryBytes: cfg.ray.objectStoreMemoryBytes })),
        clusterReady: {
            nodes: cfg.nodes.map((n) => ({ name: n.name, fabricIp: n.fabricIp, sshHost: n.sshHost })),
            gpus: cfg.totalGpus,
            timeoutSeconds: cfg.ray.readyTimeoutSeconds,
        },
        serve: {
            ...common,
            node: cfg.head,
            serve: serveSpec,
            stateDir: cfg.stateDir,
            clusterGpus: cfg.totalGpus,
            readyTimeoutSeconds: cfg.serve.readyTimeoutSeconds,
        },
        native,
        apiKeyLength: 48,
    };
}

/**
 * Builds the whole resource graph from a validated config. Ordering comes from data: image IDs into containers,
 * the head's address into workers, container IDs into the readiness probe, its fingerprint into serve.
 */
export function buildCluster(cfg: ClusterConfig, stack: string): ClusterOutputs {
    const plan = planCluster(cfg, stack);
    const hosts = new Map<string, SparkNode>();
    for (const { node, ssh, ports } of plan.nodes) {
        hosts.set(node.name, new SparkNode(node.name, { node, ssh, stateDir: plan.stateDir, ports }));
    }
    const host = (name: string): SparkNode => hosts.get(name)!;
    const head = host(cfg.head.name);

    const image = new ImageDistribution("image", { ...plan.image, nodes: [...hosts.values()] });
    const apiKey = new random.RandomPassword("api-key", { length: plan.apiKeyLength, special: false });
    const nodesOut = cfg.nodes.map((n) => ({ name: n.name, role: n.role, sshHost: n.sshHost, fabricIp: n.fabricIp, gpus: n.gpus }));

    if (plan.backend === "native") {
        // vLLM's own multi-node: no Ray containers and no Ray probe; rank 0's readiness check is the gate.
        const serve = new VllmNativeServe("serve", {
            ranks: plan.native.map((params) => ({ params, host: host(params.node.name), imageId: image.imageIds[params.node.name] })),
            apiKey: apiKey.result,
            readyTimeoutSeconds: plan.serve.readyTimeoutSeconds,
        });
        return {
            endpoint: serve.endpoint,
            servedModelName: cfg.model.servedName,
            apiKey: pulumi.secret(apiKey.result),
            rayDashboard: "none (backend native runs no Ray)",
            nodes: nodesOut,
            clusterFingerprint: serve.fingerprint,
        };
    }

    // The plan's node facts are the hosts' own; components take them from their host.
    const rayHead = new RayHead("ray-head", { ...plan.rayHead, host: head, imageId: image.imageIds[cfg.head.name] });

    const workers = plan.workers.map(
        (w) =>
            new RayWorker(`ray-worker-${w.node.name}`, {
                ...w,
                host: host(w.node.name),
                imageId: image.imageIds[w.node.name],
                headAddress: rayHead.address,
                headContainerId: rayHead.container.id,
            }),
    );

    const ready = new ClusterReady("cluster-ready", {
        ...plan.clusterReady,
        head,
        address: rayHead.address,
        containerIds: [rayHead.container.id, ...workers.map((w) => w.container.id)],
    });

    const serve = new VllmServe("serve", {
        ...plan.serve,
        head,
        imageId: image.imageIds[cfg.head.name],
        rayAddress: rayHead.address,
        clusterFingerprint: ready.fingerprint,
        apiKey: apiKey.result,
    });

    return {
        endpoint: serve.endpoint,
        servedModelName: cfg.model.servedName,
        apiKey: pulumi.secret(apiKey.result),
        rayDashboard: dashboardTunnelHint(head.ssh, cfg.ray.dashboardPort),
        nodes: nodesOut,
        clusterFingerprint: ready.fingerprint,
    };
}

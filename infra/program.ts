import * as pulumi from "@pulumi/pulumi";
import * as random from "@pulumi/random";
import { ClusterReady } from "../components/clusterReady";
import { dashboardTunnelHint, sshTargetOf } from "../components/commands";
import { ImageDistribution } from "../components/imageDistribution";
import { RayHead } from "../components/rayHead";
import { RayWorker } from "../components/rayWorker";
import { SparkNode } from "../components/sparkNode";
import { VllmServe } from "../components/vllmServe";
import { ClusterConfig } from "./config";

export interface ClusterOutputs {
    endpoint: pulumi.Output<string>;
    servedModelName: string;
    apiKey: pulumi.Output<string>;
    rayDashboard: string;
    nodes: { name: string; role: string; sshHost: string; fabricIp: string; gpus: number }[];
    clusterFingerprint: pulumi.Output<string>;
}

/**
 * Builds the whole resource graph from a validated config. Ordering comes from data: image IDs into containers,
 * the head's address into workers, container IDs into the readiness probe, its fingerprint into serve.
 */
export function buildCluster(cfg: ClusterConfig, stack: string): ClusterOutputs {
    const hosts = new Map<string, SparkNode>();
    for (const n of cfg.nodes) {
        hosts.set(n.name, new SparkNode(n.name, { node: n, ssh: sshTargetOf(n, cfg.ssh), stateDir: cfg.stateDir }));
    }
    const host = (name: string): SparkNode => hosts.get(name)!;
    const head = host(cfg.head.name);

    const image = new ImageDistribution("image", {
        ref: cfg.image.ref,
        source: cfg.image.source,
        sourceNode: cfg.image.sourceNode,
        nodes: [...hosts.values()],
    });

    const model = { hostPath: cfg.model.hostPath, containerPath: cfg.model.containerPath };
    const common = {
        imageRef: cfg.image.ref,
        stack,
        objectStoreMemoryBytes: cfg.ray.objectStoreMemoryBytes,
        model,
        shmSize: cfg.serve.shmSize,
        maxRestarts: cfg.serve.maxRestarts,
    };

    const rayHead = new RayHead("ray-head", {
        ...common,
        host: head,
        imageId: image.imageIds[cfg.head.name],
        ports: { gcsPort: cfg.ray.gcsPort, dashboardPort: cfg.ray.dashboardPort, clientPort: cfg.ray.clientPort },
        stateDir: cfg.stateDir,
    });

    const workers = cfg.workers.map(
        (w) =>
            new RayWorker(`ray-worker-${w.name}`, {
                ...common,
                host: host(w.name),
                imageId: image.imageIds[w.name],
                headAddress: rayHead.address,
                headContainerId: rayHead.container.id,
            }),
    );

    const ready = new ClusterReady("cluster-ready", {
        head,
        address: rayHead.address,
        nodes: cfg.nodes.map((n) => ({ name: n.name, fabricIp: n.fabricIp, sshHost: n.sshHost })),
        gpus: cfg.totalGpus,
        timeoutSeconds: cfg.ray.readyTimeoutSeconds,
        containerIds: [rayHead.container.id, ...workers.map((w) => w.container.id)],
    });

    const apiKey = new random.RandomPassword("api-key", { length: 48, special: false });

    const serve = new VllmServe("serve", {
        head,
        imageId: image.imageIds[cfg.head.name],
        imageRef: cfg.image.ref,
        stack,
        serve: {
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
        },
        modelHostPath: cfg.model.hostPath,
        stateDir: cfg.stateDir,
        rayAddress: rayHead.address,
        clusterFingerprint: ready.fingerprint,
        clusterGpus: cfg.totalGpus,
        apiKey: apiKey.result,
        shmSize: cfg.serve.shmSize,
        maxRestarts: cfg.serve.maxRestarts,
        readyTimeoutSeconds: cfg.serve.readyTimeoutSeconds,
    });

    return {
        endpoint: serve.endpoint,
        servedModelName: cfg.model.servedName,
        apiKey: pulumi.secret(apiKey.result),
        rayDashboard: dashboardTunnelHint(head.ssh, cfg.ray.dashboardPort),
        nodes: cfg.nodes.map((n) => ({
            name: n.name,
            role: n.role,
            sshHost: n.sshHost,
            fabricIp: n.fabricIp,
            gpus: n.gpus,
        })),
        clusterFingerprint: ready.fingerprint,
    };
}

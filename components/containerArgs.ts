import * as docker from "@pulumi/docker";
import * as pulumi from "@pulumi/pulumi";
import {
    API_KEY_CONTAINER_PATH,
    DASHBOARD_HOST,
    HEADLESS_ENTRYPOINT,
    LABEL_PREFIX,
    NativeRank,
    NodeSpec,
    RAY_ENTRYPOINT,
    RAY_HEAD_CONTAINER,
    RAY_SESSION_CONTAINER_DIR,
    RAY_WORKER_CONTAINER,
    RayPorts,
    SERVE_CONTAINER,
    SERVE_ENTRYPOINT,
    ServeSpec,
    apiKeyHostPath,
    containerLabels,
    labelList,
    nativeServeCommand,
    nodeEnv,
    rayHeadCommand,
    rayHeadPortsLabel,
    rayWorkerCommand,
    raySessionHostDir,
    serveCommand,
    serveEnv,
    shmSizeMb,
} from "./commands";

/** What every project container shares; role-specific parts are passed in. */
export interface BaseContainerInputs {
    containerName: string;
    node: NodeSpec;
    /** Image ID on this host (output of ImageDistribution), so an image change replaces the container. */
    imageId: pulumi.Input<string>;
    entrypoints: string[];
    command: pulumi.Input<pulumi.Input<string>[]>;
    envs: pulumi.Input<pulumi.Input<string>[]>;
    labels: Record<string, string>;
    /** Labels whose value is only known at deploy time (e.g. the cluster fingerprint). */
    dynamicLabels?: { label: string; value: pulumi.Input<string> }[];
    volumes: docker.types.input.ContainerVolume[];
    /** Bind mounts whose source must already exist (docker refuses to create them, unlike `volumes`). */
    mounts?: docker.types.input.ContainerMount[];
    shmSize?: string;
    maxRestarts: number;
}

/**
 * Host network and IPC (NCCL and Ray's object store need both), GPUs only with the nvidia runtime, bounded
 * restarts so a crash loop cannot leak GPU memory forever, and mustRun so `pulumi refresh` sees a dead
 * container as drift.
 */
export function baseContainerArgs(c: BaseContainerInputs): docker.ContainerArgs {
    return {
        name: c.containerName,
        image: c.imageId,
        networkMode: "host",
        ipcMode: "host",
        shmSize: shmSizeMb(c.shmSize),
        entrypoints: c.entrypoints,
        command: c.command,
        envs: c.envs,
        labels: [...labelList(c.labels), ...(c.dynamicLabels ?? [])],
        volumes: c.volumes,
        mounts: c.mounts,
        gpus: c.node.gpuRuntime === "nvidia" ? "all" : undefined,
        restart: "on-failure",
        maxRetryCount: c.maxRestarts,
        mustRun: true,
        wait: false,
        destroyGraceSeconds: 30,
    };
}

/**
 * Resource options of every project container. Fixed names make a replacement delete the old container first.
 * A container found stopped by `pulumi refresh` (its restarts used up, or killed) would otherwise be started again
 * in place under the same ID, and nothing that depends on it would notice: replacing it instead gives it a new
 * ID, which replaces what joined it (workers, the gate, serve) and re-runs the readiness wait, in that order.
 */
export function containerOptions(
    parent: pulumi.Resource,
    provider: pulumi.ProviderResource,
    dependsOn: pulumi.Resource[] = [],
): pulumi.CustomResourceOptions {
    return { parent, provider, deleteBeforeReplace: true, replaceOnChanges: ["mustRun"], dependsOn };
}

export function modelVolume(hostPath: string, containerPath: string): docker.types.input.ContainerVolume {
    return { hostPath, containerPath, readOnly: true };
}

/**
 * The API key file, read-only. A `mounts` bind (not a `volumes` entry) so that a missing key file makes container
 * creation fail instead of Docker creating an empty directory in its place; the entrypoint fails closed as well.
 */
export function apiKeyMount(stateDir: string, node: string): docker.types.input.ContainerMount {
    return { type: "bind", source: apiKeyHostPath(stateDir, node), target: API_KEY_CONTAINER_PATH, readOnly: true };
}

/**
 * Applies `f` to a value that is plain (a resolved value) or deferred (an Output or Promise from the graph).
 * Plain in, plain out, synchronously and without the Pulumi runtime: so the container-args builders below are
 * pure functions of resolved values, while the components hand them Outputs and keep per-property dependencies.
 */
export function mapInput<T, U>(v: pulumi.Input<T>, f: (t: T) => U): pulumi.Input<U> {
    if (pulumi.Output.isInstance(v) || v instanceof Promise) {
        return pulumi.output(v).apply((t) => f(t as T));
    }
    return f(v as T);
}

/** What every role's container takes from the config (plain) plus the image ID on its host (deploy-time). */
export interface ContainerParams {
    node: NodeSpec;
    /** Image ID on this host (ImagePresence output). */
    imageId: pulumi.Input<string>;
    /** Configured image reference (label only). */
    imageRef: string;
    stack: string;
    model: { hostPath: string; containerPath: string };
    shmSize?: string;
    maxRestarts: number;
}

export interface RayHeadContainerParams extends ContainerParams {
    ports: RayPorts;
    objectStoreMemoryBytes?: number;
    stateDir: string;
}

/** The Ray head container: bound to the head's fabric IP, dashboard on loopback, Ray session dir on the host. */
export function rayHeadContainerArgs(p: RayHeadContainerParams): docker.ContainerArgs {
    return baseContainerArgs({
        containerName: RAY_HEAD_CONTAINER,
        node: p.node,
        imageId: p.imageId,
        entrypoints: RAY_ENTRYPOINT,
        command: rayHeadCommand({ node: p.node, ports: p.ports, objectStoreMemoryBytes: p.objectStoreMemoryBytes }),
        envs: nodeEnv(p.node),
        labels: containerLabels(
            { stack: p.stack, role: "ray-head", node: p.node, imageRef: p.imageRef, ports: rayHeadPortsLabel(p.ports) },
            { "dashboard-host": DASHBOARD_HOST },
        ),
        volumes: [
            modelVolume(p.model.hostPath, p.model.containerPath),
            { hostPath: raySessionHostDir(p.stateDir, p.node.name), containerPath: RAY_SESSION_CONTAINER_DIR },
        ],
        shmSize: p.shmSize,
        maxRestarts: p.maxRestarts,
    });
}

export interface RayWorkerContainerParams extends ContainerParams {
    /** The head's `<fabric IP>:<gcs port>` (deploy-time: known once the head container exists). */
    headAddress: pulumi.Input<string>;
    /** The head container's ID, carried as a label so a replaced head replaces its workers. */
    headContainerId: pulumi.Input<string>;
    objectStoreMemoryBytes?: number;
}

/** Host ports a Ray worker listens on: none configured (it dials the head; Ray's own worker ports are dynamic). */
export function rayWorkerPorts(): Record<string, number> {
    return {};
}

/** A Ray worker container joining the head over the fabric with its own fabric IP. */
export function rayWorkerContainerArgs(p: RayWorkerContainerParams): docker.ContainerArgs {
    return baseContainerArgs({
        containerName: RAY_WORKER_CONTAINER,
        node: p.node,
        imageId: p.imageId,
        entrypoints: RAY_ENTRYPOINT,
        command: mapInput(p.headAddress, (headAddress) =>
            rayWorkerCommand({ node: p.node, headAddress, objectStoreMemoryBytes: p.objectStoreMemoryBytes }),
        ),
        envs: nodeEnv(p.node),
        labels: containerLabels({ stack: p.stack, role: "ray-worker", node: p.node, imageRef: p.imageRef, ports: rayWorkerPorts() }),
        dynamicLabels: [{ label: `${LABEL_PREFIX}head-container-id`, value: p.headContainerId }],
        volumes: [modelVolume(p.model.hostPath, p.model.containerPath)],
        shmSize: p.shmSize,
        maxRestarts: p.maxRestarts,
    });
}

export interface ServeContainerParams extends ContainerParams {
    serve: ServeSpec;
    stateDir: string;
    /** Hash of the API key (deploy-time, not secret): a new key replaces the server, which reads it at start. */
    apiKeyHash: pulumi.Input<string>;
    /** Ray head address `<fabric IP>:<gcs port>` (deploy-time). */
    rayAddress: pulumi.Input<string>;
    /** ClusterReady's fingerprint (deploy-time): a re-formed Ray cluster restarts serve. */
    clusterFingerprint: pulumi.Input<string>;
    /** Total GPUs of all nodes (label). */
    clusterGpus: number;
}

/** Host ports the serve container (backend ray, on the head) listens on: the API. */
export function servePorts(p: Pick<ServeContainerParams, "serve">): Record<string, number> {
    return { serve: p.serve.port };
}

/**
 * vllm serve on the head: the key is read from the read-only mounted file by the entrypoint (never in Cmd, Env
 * or labels), and the Ray session dir is shared with the head container.
 */
export function serveContainerArgs(p: ServeContainerParams): docker.ContainerArgs {
    return baseContainerArgs({
        containerName: SERVE_CONTAINER,
        node: p.node,
        imageId: p.imageId,
        entrypoints: SERVE_ENTRYPOINT,
        command: serveCommand(p.serve),
        envs: mapInput(p.rayAddress, (addr) => serveEnv(p.node, addr)),
        labels: containerLabels(
            { stack: p.stack, role: "serve", node: p.node, imageRef: p.imageRef, ports: servePorts(p) },
            {
                "tensor-parallel-size": String(p.serve.tensorParallelSize),
                "pipeline-parallel-size": String(p.serve.pipelineParallelSize),
                "cluster-gpus": String(p.clusterGpus),
                "api-key-file": API_KEY_CONTAINER_PATH,
            },
        ),
        dynamicLabels: [
            { label: `${LABEL_PREFIX}cluster-fingerprint`, value: p.clusterFingerprint },
            { label: `${LABEL_PREFIX}api-key-sha256`, value: p.apiKeyHash },
        ],
        volumes: [
            modelVolume(p.model.hostPath, p.serve.modelContainerPath),
            { hostPath: raySessionHostDir(p.stateDir, p.node.name), containerPath: RAY_SESSION_CONTAINER_DIR },
        ],
        mounts: [apiKeyMount(p.stateDir, p.node.name)],
        shmSize: p.shmSize,
        maxRestarts: p.maxRestarts,
    });
}

export interface NativeServeContainerParams extends ContainerParams {
    serve: ServeSpec;
    stateDir: string;
    rank: NativeRank;
    /** Total GPUs of all nodes (label). */
    clusterGpus: number;
    /** Rank 0 only: hash of the API key (deploy-time, not secret); a new key replaces the server. */
    apiKeyHash?: pulumi.Input<string>;
    /**
     * Ranks > 0 only: rank 0's container ID (deploy-time), carried as a label so a replaced rank 0 replaces every
     * other rank too: they joined its rendezvous and must restart together.
     */
    rank0ContainerId?: pulumi.Input<string>;
}

/**
 * The host ports a node's containers listen on, as plain sorted numbers: the values of the same port maps the
 * containers carry in their `vllm-cluster.ports` label, so preflight checks exactly what will be opened.
 */
export function listenPorts(...labels: Record<string, number>[]): number[] {
    return [...new Set(labels.flatMap((l) => Object.values(l)))].sort((a, b) => a - b);
}

/** Host ports a native rank listens on: rank 0 the API and the rendezvous, the others none (they only dial out). */
export function nativeServePorts(p: Pick<NativeServeContainerParams, "serve" | "rank">): Record<string, number> {
    return p.rank.nodeRank === 0 ? { serve: p.serve.port, master: p.rank.masterPort } : {};
}

/**
 * One rank of vLLM's own multi-node (backend native), `vllm-serve` on every node, host network and IPC, pinned to
 * the node's fabric IP and interface (VLLM_HOST_IP, NCCL/GLOO socket ifname). Rank 0 serves the API with the key
 * read by the entrypoint from the read-only key file (never in Cmd, Env or labels); ranks > 0 are headless.
 */
export function nativeServeContainerArgs(p: NativeServeContainerParams): docker.ContainerArgs {
    const rank0 = p.rank.nodeRank === 0;
    const extra: Record<string, string> = {
        "node-rank": String(p.rank.nodeRank),
        "tensor-parallel-size": String(p.serve.tensorParallelSize),
        "pipeline-parallel-size": String(p.serve.pipelineParallelSize),
        "cluster-gpus": String(p.clusterGpus),
    };
    if (rank0) {
        extra["api-key-file"] = API_KEY_CONTAINER_PATH;
    }
    const dynamicLabels: { label: string; value: pulumi.Input<string> }[] = [];
    if (rank0 && p.apiKeyHash !== undefined) {
        dynamicLabels.push({ label: `${LABEL_PREFIX}api-key-sha256`, value: p.apiKeyHash });
    }
    if (!rank0 && p.rank0ContainerId !== undefined) {
        dynamicLabels.push({ label: `${LABEL_PREFIX}rank0-container-id`, value: p.rank0ContainerId });
    }
    return baseContainerArgs({
        containerName: SERVE_CONTAINER,
        node: p.node,
        imageId: p.imageId,
        entrypoints: rank0 ? SERVE_ENTRYPOINT : HEADLESS_ENTRYPOINT,
        command: nativeServeCommand(p.serve, p.rank),
        envs: nodeEnv(p.node),
        labels: containerLabels({ stack: p.stack, role: "serve", node: p.node, imageRef: p.imageRef, ports: nativeServePorts(p) }, extra),
        dynamicLabels,
        volumes: [modelVolume(p.model.hostPath, p.serve.modelContainerPath)],
        mounts: rank0 ? [apiKeyMount(p.stateDir, p.node.name)] : undefined,
        shmSize: p.shmSize,
        maxRestarts: p.maxRestarts,
    });
}

/**
 * What every project container has in common, as docker provider arguments built from plain values: host
 * network and IPC, explicit entrypoint, the model read-only, bounded restarts, and the labels of the contract.
 */
import * as docker from "@pulumi/docker";
import * as pulumi from "@pulumi/pulumi";
import type { MemoryGuardConfig, ModelConfig, NodeConfig, RayConfig, SecretConfig, ServeConfig } from "../config";
import { HostMemory, InitSpec, initEntrypoint, initMount, nodeMemory } from "./containerInit";
import { labelList } from "./labels";
import { LABEL } from "../contract";
import {
    API_KEY_CONTAINER_PATH,
    COMPILE_CACHE_CONTAINER_DIR,
    RAY_TOKEN_CONTAINER_PATH,
    SHARED_TMP_CONTAINER_DIR,
    TLS_CERT_CONTAINER_PATH,
    TLS_KEY_CONTAINER_PATH,
    apiKeyHostPath,
    compileCacheHostDir,
    rayTokenHostPath,
    sharedTmpHostDir,
    tlsCertHostPath,
    tlsKeyHostPath,
} from "./node";

/** What every role's container takes from the config (plain) plus the image ID on its host (deploy-time). */
export interface ContainerInput {
    stack: string;
    /** The cluster's name (the VllmCluster's): it names the containers on the host (containerNames). */
    cluster: string;
    node: NodeConfig;
    /** Image ID on this host (an ImageDistribution output), so an image change replaces the container. */
    imageId: pulumi.Input<string>;
    /** Configured image reference (label only). */
    imageRef: string;
    model: ModelConfig;
    /** The serve settings: the serve containers' shared memory size and restart bound, and the Ray containers' unless `ray` sets them. */
    serve: ServeConfig;
    /** The Ray containers' own shared memory size and restart bound (backend ray); unset: the serve settings'. */
    ray?: Pick<RayConfig, "shmSize" | "maxRestarts">;
    stateDir: string;
    /**
     * Ray token authentication (backend ray, `ray.auth: token`): the hash of the token installed on this node (a
     * KeyFile output, so the container starts after the file exists and a new token replaces it). The container
     * gets RAY_AUTH_MODE=token and the token file, read-only, at RAY_TOKEN_CONTAINER_PATH.
     */
    rayTokenHash?: pulumi.Input<string>;
    /**
     * With model.source: the model's content checksum (a ModelDistribution output), carried as a label, so the
     * container starts after the model is copied to its host and new model content replaces it.
     */
    modelDigest?: pulumi.Input<string>;
    /** Which free-form values came from secret config: those inputs are made secret (state, diffs, outputs). */
    secrets?: SecretConfig;
    /** The memory guard's settings: every container's ceiling and floor. */
    memoryGuard: MemoryGuardConfig;
    /** The host's memory as its preflight found it (deploy-time): the default ceiling of unifiedMemory nodes. */
    hostMemory: pulumi.Input<HostMemory>;
}

/** What one container adds to the shared part. */
export interface ContainerSpec {
    containerName: string;
    entrypoints: string[];
    command: pulumi.Input<pulumi.Input<string>[]>;
    envs: pulumi.Input<pulumi.Input<string>[]>;
    labels: Record<string, string>;
    /** Labels whose value is only known at deploy time (e.g. the cluster fingerprint). */
    dynamicLabels?: { label: string; value: pulumi.Input<string> }[];
    volumes: docker.types.input.ContainerVolume[];
    /** Bind mounts whose source must already exist (docker refuses to create them, unlike `volumes`). */
    mounts?: docker.types.input.ContainerMount[];
    /** What its init (container_init.sh, PID 1) waits for and when its command counts as healthy. */
    init: Omit<InitSpec, "maxStarts">;
}

/** A container's /dev/shm size and restart bound: serve's for serve, else ray's where set, else serve's (as before). */
export function containerLimits(p: Pick<ContainerInput, "serve" | "ray">, serve: boolean): { shmSize?: string; maxRestarts: number } {
    if (serve) return { shmSize: p.serve.shmSize, maxRestarts: p.serve.maxRestarts };
    return { shmSize: p.ray?.shmSize ?? p.serve.shmSize, maxRestarts: p.ray?.maxRestarts ?? p.serve.maxRestarts };
}

/**
 * Host network and IPC (NCCL and Ray's object store need both), the node's /tmp and compile cache directories, GPUs
 * only with the nvidia runtime, mustRun so `pulumi refresh` sees a dead container as drift, and container_init.sh as
 * PID 1: a crash budget of serve.maxRestarts (a Ray container: ray.maxRestarts) restarts kept on the host's disk (so a crash loop cannot leak GPU memory
 * forever, not even across reboots), the memory ceiling and floor, and the on-failure policy with a stop answered
 * by exit 143, so the engine starts the container again when it comes back after a reboot.
 */
export function containerArgs(p: ContainerInput, c: ContainerSpec): docker.ContainerArgs {
    const auth = p.rayTokenHash;
    const envs = auth ? mapInput(c.envs, (e) => [...e, ...RAY_TOKEN_ENV]) : c.envs;
    const serve = c.labels[LABEL.role] === "serve";
    // the serve command carries serve.extraArgs; the Ray containers' commands carry none
    const carriesExtraArgs = serve && p.serve.extraArgs.length > 0;
    const memory = nodeMemory(p.node, p.memoryGuard, p.hostMemory, serve ? p.serve.memoryLimit : undefined);
    const { shmSize, maxRestarts } = containerLimits(p, serve);
    const init = { ...c.init, maxStarts: maxRestarts + 1 };
    return {
        name: c.containerName,
        image: p.imageId,
        networkMode: "host",
        ipcMode: "host",
        shmSize: shmSizeMb(shmSize),
        entrypoints: initEntrypoint(c.containerName, p.node.name, memory, init, c.entrypoints),
        command: p.secrets?.serveArgs && carriesExtraArgs ? pulumi.secret(c.command) : c.command,
        envs: p.secrets?.nodeEnv && Object.keys(p.node.env).length > 0 ? pulumi.secret(envs) : envs,
        labels: [
            ...labelList(c.labels),
            ...(c.dynamicLabels ?? []),
            ...(auth ? [{ label: LABEL.rayTokenHash, value: auth }] : []),
            ...(p.modelDigest !== undefined ? [{ label: LABEL.modelDigest, value: p.modelDigest }] : []),
        ],
        volumes: [...c.volumes, ...nodeVolumes(p.stateDir, p.node.name)],
        mounts: [...(c.mounts ?? []), ...(auth ? [rayTokenMount(p.stateDir, p.node.name)] : []), initMount(p.stateDir, p.node.name)],
        memory: memory.ceilingMb as pulumi.Input<number>,
        gpus: p.node.gpuRuntime === "nvidia" ? "all" : undefined,
        // unbounded here: container_init.sh keeps the budget, which (unlike Docker's count) survives engine restarts
        restart: "on-failure",
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
    host: { provider: pulumi.ProviderResource; preflight: pulumi.Resource },
    dependsOn: pulumi.Resource[] = [],
): pulumi.CustomResourceOptions {
    // after the host's preflight, said here: no data of it flows into a container's arguments
    return {
        parent,
        provider: host.provider,
        deleteBeforeReplace: true,
        replaceOnChanges: ["mustRun"],
        dependsOn: [host.preflight, ...dependsOn],
    };
}

/** What makes Ray (head, worker, and vLLM as a Ray driver) require and present the token. */
export const RAY_TOKEN_ENV = ["RAY_AUTH_MODE=token", `RAY_AUTH_TOKEN_PATH=${RAY_TOKEN_CONTAINER_PATH}`];

/** The Ray token file, read-only; like the API key a `mounts` bind, so a missing file fails container creation. */
export function rayTokenMount(stateDir: string, node: string): docker.types.input.ContainerMount {
    return { type: "bind", source: rayTokenHostPath(stateDir, node), target: RAY_TOKEN_CONTAINER_PATH, readOnly: true };
}

/**
 * What every container of a node shares through host directories: /tmp (see SHARED_TMP_CONTAINER_DIR) and the
 * compile caches (see COMPILE_CACHE_CONTAINER_DIR).
 */
export function nodeVolumes(stateDir: string, node: string): docker.types.input.ContainerVolume[] {
    return [
        { hostPath: sharedTmpHostDir(stateDir, node), containerPath: SHARED_TMP_CONTAINER_DIR },
        { hostPath: compileCacheHostDir(stateDir, node), containerPath: COMPILE_CACHE_CONTAINER_DIR },
    ];
}

/** The model directory, read-only, at its container path. */
export function modelVolume(model: Pick<ModelConfig, "hostPath" | "containerPath">): docker.types.input.ContainerVolume {
    return { hostPath: model.hostPath, containerPath: model.containerPath, readOnly: true };
}

/**
 * The API key file, read-only. A `mounts` bind (not a `volumes` entry) so that a missing key file makes container
 * creation fail instead of Docker creating an empty directory in its place; the entrypoint fails closed as well.
 */
export function apiKeyMount(stateDir: string, node: string): docker.types.input.ContainerMount {
    return { type: "bind", source: apiKeyHostPath(stateDir, node), target: API_KEY_CONTAINER_PATH, readOnly: true };
}

/** The files the API server reads at start on the head: its key, and with serve.tls its certificate and TLS key. */
export function serveFileMounts(stateDir: string, node: string, tls: boolean): docker.types.input.ContainerMount[] {
    const ro = (source: string, target: string) => ({ type: "bind", source, target, readOnly: true });
    return [
        apiKeyMount(stateDir, node),
        ...(tls
            ? [ro(tlsCertHostPath(stateDir, node), TLS_CERT_CONTAINER_PATH), ro(tlsKeyHostPath(stateDir, node), TLS_KEY_CONTAINER_PATH)]
            : []),
    ];
}

/**
 * Applies `f` to a value that is plain (a resolved value) or deferred (an Output or Promise from the graph).
 * Plain in, plain out, synchronously and without the Pulumi runtime: so the container-args builders are pure
 * functions of resolved values, while the components hand them Outputs and keep per-property dependencies.
 */
export function mapInput<T, U>(v: pulumi.Input<T>, f: (t: T) => U): pulumi.Input<U> {
    if (pulumi.Output.isInstance(v) || v instanceof Promise) {
        return pulumi.output(v).apply((t) => f(t as T));
    }
    return f(v as T);
}

/** docker `shmSize` is in MB; config uses docker CLI syntax (64g, 512m). */
export function shmSizeMb(size: string | undefined): number | undefined {
    if (size === undefined) {
        return undefined;
    }
    const m = /^(\d+)([bkmg]?)$/i.exec(size);
    if (!m) {
        throw new Error(`invalid shm size ${JSON.stringify(size)}`);
    }
    const n = Number(m[1]);
    switch (m[2].toLowerCase()) {
        case "g":
            return n * 1024;
        case "m":
            return n;
        case "k":
            return Math.max(1, Math.ceil(n / 1024));
        default:
            return Math.max(1, Math.ceil(n / (1024 * 1024)));
    }
}

/** The vLLM serve containers: next to the Ray head (backend ray), or one rank per host (backend native). */
import * as docker from "@pulumi/docker";
import * as pulumi from "@pulumi/pulumi";
import { LABEL, containerNames, containerPorts, portsLabel } from "../contract";
import { INIT_CONTAINER_DIR } from "./containerInit";
import { base64, scriptFile, shippedScriptArgv } from "./remoteStep";
import { ContainerInput, containerArgs, mapInput, modelVolume, serveFileMounts } from "./containers";
import { containerLabels } from "./labels";
import { API_KEY_CONTAINER_PATH, nodeEnv } from "./node";
import type { ClusterReadySpec } from "./ray";
import { HEADLESS_ENTRYPOINT, NativeRank, SERVE_ENTRYPOINT, nativeServeCommand, serveCommand, serveEnv } from "./vllm";

/** The labels every serve container adds: its parallelism and the GPUs of the whole cluster. */
function parallelismLabels(p: ContainerInput, clusterGpus: number): Record<string, string> {
    return {
        "tensor-parallel-size": String(p.serve.tensorParallelSize),
        "pipeline-parallel-size": String(p.serve.pipelineParallelSize),
        "cluster-gpus": String(clusterGpus),
    };
}

/** Where the server's /health answers on its own host: healthy, its crash budget is full again. */
function healthyUrl(p: ContainerInput): string {
    const host = p.serve.host === "0.0.0.0" ? "127.0.0.1" : p.serve.host;
    return `${p.serve.tls ? "https" : "http"}://${host}:${p.serve.port}/health`;
}

/**
 * The serve container's entrypoint: with serve.watchdog, infra/scripts/serve_watchdog.sh in front of the server's own
 * (it watches with infra/scripts/serve_watchdog.py, one real completion with the key from the container's read-only
 * key file, over loopback, and restarts a server that stopped answering), then SERVE_ENTRYPOINT.
 */
function watchedServeEntrypoint(p: ContainerInput): string[] {
    const w = p.serve.watchdog;
    if (!w.enabled) {
        return SERVE_ENTRYPOINT;
    }
    const url = `${p.serve.tls ? "https" : "http"}://127.0.0.1:${p.serve.port}`;
    const name = containerNames(p.cluster).serve;
    return [
        ...shippedScriptArgv("serve_watchdog.sh", [
            `name=${name}`,
            `node=${p.node.name}`,
            `state-dir=${INIT_CONTAINER_DIR}`,
            `probe=${base64(scriptFile("serve_watchdog.py").text)}`,
            `probe-arg=${JSON.stringify({ url, keyFile: API_KEY_CONTAINER_PATH, model: p.model.servedName })}`,
            `every=${w.intervalSeconds}`,
            `timeout=${w.timeoutSeconds}`,
            `misses=${w.failures}`,
            `max-restarts=${p.serve.maxRestarts}`,
            "--",
        ]),
        ...SERVE_ENTRYPOINT,
    ];
}

/** The TLS files' hash as a label, when there are TLS files. */
function tlsLabel(hash: pulumi.Input<string> | undefined): { label: string; value: pulumi.Input<string> }[] {
    return hash === undefined ? [] : [{ label: LABEL.tlsHash, value: hash }];
}

export interface ServeContainerInput extends ContainerInput {
    /** Hash of the API key (deploy-time, not secret): a new key replaces the server, which reads it at start. */
    apiKeyHash: pulumi.Input<string>;
    /** With serve.tls: hash of the certificate and TLS key installed on the head (a new one replaces the server). */
    tlsHash?: pulumi.Input<string>;
    /** Ray head address `<fabric IP>:<gcs port>` (deploy-time). */
    rayAddress: pulumi.Input<string>;
    /** ClusterReady's fingerprint (deploy-time): a replaced Ray container or a changed roster replaces serve. */
    clusterFingerprint: pulumi.Input<string>;
    /** Total GPUs of all nodes (label). */
    clusterGpus: number;
    /** Every node of the Ray cluster: serve starts (after a reboot too) only once Ray sees each on its fabric IP. */
    rayNodes: ClusterReadySpec["nodes"];
}

/**
 * vllm serve on the head: the key is read from the read-only mounted file by the entrypoint (never in Cmd, Env
 * or labels); its /tmp, with the Ray session dir, is the head container's (every container of a node has the node's).
 */
export function serveContainerArgs(p: ServeContainerInput): docker.ContainerArgs {
    return containerArgs(p, {
        containerName: containerNames(p.cluster).serve,
        entrypoints: watchedServeEntrypoint(p),
        command: serveCommand(p.serve, p.model),
        envs: mapInput(p.rayAddress, (addr) => serveEnv(p.node, addr)),
        labels: containerLabels(
            {
                stack: p.stack,
                cluster: p.cluster,
                role: "serve",
                node: p.node,
                imageRef: p.imageRef,
                ports: portsLabel(containerPorts("ray-serve", { servePort: p.serve.port })),
            },
            { ...parallelismLabels(p, p.clusterGpus), "api-key-file": API_KEY_CONTAINER_PATH },
        ),
        dynamicLabels: [
            { label: LABEL.clusterFingerprint, value: p.clusterFingerprint },
            { label: LABEL.apiKeyHash, value: p.apiKeyHash },
            ...tlsLabel(p.tlsHash),
        ],
        volumes: [modelVolume(p.model)],
        mounts: serveFileMounts(p.stateDir, p.node.name, p.serve.tls !== undefined),
        init: {
            healthyUrl: healthyUrl(p),
            // the gate's own probe, looking once: a Ray cluster that lacks a host would fail serve at start
            waitPython: {
                script: "ray_cluster_probe.py",
                arg: mapInput(p.rayAddress, (address) =>
                    JSON.stringify({ address, nodes: p.rayNodes, gpus: p.clusterGpus, timeoutSeconds: 0 }),
                ),
            },
        },
    });
}

export interface NativeRankContainerInput extends ContainerInput {
    rank: NativeRank;
    /** Total GPUs of all nodes (label). */
    clusterGpus: number;
    /** Rank 0 only: hash of the API key (deploy-time, not secret); a new key replaces the server. */
    apiKeyHash?: pulumi.Input<string>;
    /** Rank 0 only, with serve.tls: hash of the TLS files (a new certificate replaces the server). */
    tlsHash?: pulumi.Input<string>;
    /**
     * Ranks > 0 only: rank 0's container ID (deploy-time), carried as a label so a replaced rank 0 replaces every
     * other rank too: they joined its rendezvous and must restart together.
     */
    rank0ContainerId?: pulumi.Input<string>;
}

/**
 * One rank of vLLM's own multi-node (backend native), `vllm-serve` on every node, host network and IPC, pinned to
 * the node's fabric IP and interface (VLLM_HOST_IP, NCCL/GLOO socket ifname). Rank 0 serves the API with the key
 * read by the entrypoint from the read-only key file (never in Cmd, Env or labels); ranks > 0 are headless.
 */
export function nativeRankContainerArgs(p: NativeRankContainerInput): docker.ContainerArgs {
    const rank0 = p.rank.nodeRank === 0;
    const kind = rank0 ? "native-rank0" : "native-headless";
    const extra: Record<string, string> = { "node-rank": String(p.rank.nodeRank), ...parallelismLabels(p, p.clusterGpus) };
    const dynamicLabels: { label: string; value: pulumi.Input<string> }[] = [];
    if (rank0) {
        extra["api-key-file"] = API_KEY_CONTAINER_PATH;
        if (p.apiKeyHash !== undefined) {
            dynamicLabels.push({ label: LABEL.apiKeyHash, value: p.apiKeyHash });
        }
        dynamicLabels.push(...tlsLabel(p.tlsHash));
    } else if (p.rank0ContainerId !== undefined) {
        dynamicLabels.push({ label: LABEL.rank0ContainerId, value: p.rank0ContainerId });
    }
    return containerArgs(p, {
        containerName: containerNames(p.cluster).serve,
        entrypoints: rank0 ? SERVE_ENTRYPOINT : HEADLESS_ENTRYPOINT,
        command: nativeServeCommand(p.serve, p.model, p.rank),
        envs: nodeEnv(p.node),
        labels: containerLabels(
            {
                stack: p.stack,
                cluster: p.cluster,
                role: "serve",
                node: p.node,
                imageRef: p.imageRef,
                ports: portsLabel(containerPorts(kind, { servePort: p.serve.port, masterPort: p.rank.masterPort })),
            },
            extra,
        ),
        dynamicLabels,
        volumes: [modelVolume(p.model)],
        mounts: rank0 ? serveFileMounts(p.stateDir, p.node.name, p.serve.tls !== undefined) : undefined,
        // a headless rank serves no /health: it is up once it outlived the server's load time
        // no watchdog: a rank 0 restarted alone does not bring its headless ranks back (they keep failing on the lost
        // store, vLLM issue 32136), so restarting it would only trade a hang for a crash loop
        init: rank0 ? { healthyUrl: healthyUrl(p) } : { stableSeconds: p.serve.readyTimeoutSeconds },
    });
}

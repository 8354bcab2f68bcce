/** Facts about one node every container builder needs: its host paths and the environment of its containers. */
import type { NodeConfig } from "../config";
import { DEFAULT_CLUSTER, LABEL } from "../contract";
import type { RemoteStep } from "./remoteStep";

/** Where the serve container sees the API key file (bind-mounted read-only). */
export const API_KEY_CONTAINER_PATH = "/run/vllm-cluster/api-key";
/** Where the serve container sees the API's TLS certificate and key (serve.tls; bind-mounted read-only). */
export const TLS_CERT_CONTAINER_PATH = "/run/vllm-cluster/tls-cert.pem";
export const TLS_KEY_CONTAINER_PATH = "/run/vllm-cluster/tls-key.pem";
/** Where Ray containers (and serve, a Ray driver) see the Ray token file (bind-mounted read-only). */
export const RAY_TOKEN_CONTAINER_PATH = "/run/vllm-cluster/ray-token";
/**
 * /tmp of every container on a node, one host directory (<stateDir>/<node>/tmp). The Ray head and serve containers
 * must share it: the Ray session directory (/tmp/ray) and the IPC sockets vLLM's Ray executor opens between the
 * engine (in serve) and the rank running next to it (a Ray worker process of the head container) live there. With
 * separate /tmp directories that rank never connects and the engine waits forever. On the other hosts it keeps what
 * Inductor only ever writes under /tmp (its precompiled headers) across container replacement, like the caches below.
 */
export const SHARED_TMP_CONTAINER_DIR = "/tmp";

/**
 * The node's compile caches, one host directory (<stateDir>/<node>/cache) mounted into every container of the
 * node at this path, so they outlive container replacement and `pulumi destroy`. What vLLM compiles on first use
 * (torch.compile/Inductor kernels, Triton kernels, CUDA's JIT of PTX for a GPU newer than the wheel's kernels) is
 * otherwise written inside the container and compiled again by every new container: on the simulated hosts the
 * first completion after a Ray worker was replaced took 26-36 s instead of 7-9 s (the Inductor build of vLLM's
 * vocabulary-embedding mask on the rank whose container was new); on a GPU host a full torch.compile of the model
 * takes minutes.
 */
export const COMPILE_CACHE_CONTAINER_DIR = "/var/cache/vllm-cluster";

/** Where each cache goes inside COMPILE_CACHE_CONTAINER_DIR; a key the node's `env` sets itself is left to it. */
export const COMPILE_CACHE_ENV: Readonly<Record<string, string>> = {
    VLLM_CACHE_ROOT: `${COMPILE_CACHE_CONTAINER_DIR}/vllm`,
    TORCHINDUCTOR_CACHE_DIR: `${COMPILE_CACHE_CONTAINER_DIR}/torchinductor`,
    TRITON_CACHE_DIR: `${COMPILE_CACHE_CONTAINER_DIR}/triton`,
    CUDA_CACHE_PATH: `${COMPILE_CACHE_CONTAINER_DIR}/nv`,
};

export function nodeStateDir(stateDir: string, node: string): string {
    return `${stateDir}/${node}`;
}
export function apiKeyHostPath(stateDir: string, node: string): string {
    return `${nodeStateDir(stateDir, node)}/api-key`;
}
export function tlsCertHostPath(stateDir: string, node: string): string {
    return `${nodeStateDir(stateDir, node)}/tls-cert.pem`;
}
export function tlsKeyHostPath(stateDir: string, node: string): string {
    return `${nodeStateDir(stateDir, node)}/tls-key.pem`;
}
export function rayTokenHostPath(stateDir: string, node: string): string {
    return `${nodeStateDir(stateDir, node)}/ray-token`;
}
export function sharedTmpHostDir(stateDir: string, node: string): string {
    return `${nodeStateDir(stateDir, node)}/tmp`;
}
export function compileCacheHostDir(stateDir: string, node: string): string {
    return `${nodeStateDir(stateDir, node)}/cache`;
}
/** The node's init directory: every container's crash budget and verdict (infra/builders/containerInit.ts). */
export function initHostDir(stateDir: string, node: string): string {
    return `${nodeStateDir(stateDir, node)}/init`;
}

/**
 * Environment for every process that does GPU collectives on a node. VLLM_HOST_IP is the fix for the seeds'
 * placement-group failure (vLLM and Ray must agree on the fabric IP); NCCL/GLOO are pinned to the fabric
 * interface; RDMA devices go to NCCL_IB_HCA, or IB is disabled when there are none; the compile caches go to the
 * node's cache directory.
 */
export function nodeEnv(n: NodeConfig): string[] {
    const env = [
        `VLLM_HOST_IP=${n.fabricIp}`,
        `NCCL_SOCKET_IFNAME=${n.fabricInterface}`,
        `GLOO_SOCKET_IFNAME=${n.fabricInterface}`,
        n.rdmaDevices.length > 0 ? `NCCL_IB_HCA=${n.rdmaDevices.join(",")}` : "NCCL_IB_DISABLE=1",
    ];
    if (n.unifiedMemory) {
        // GPU allocations count as host memory on unified-memory hosts; Ray's memory monitor would kill the
        // vLLM workers once the model is loaded.
        env.push("RAY_memory_monitor_refresh_ms=0");
    }
    for (const k of Object.keys(COMPILE_CACHE_ENV)) {
        if (!(k in n.env)) {
            env.push(`${k}=${COMPILE_CACHE_ENV[k]}`);
        }
    }
    for (const k of Object.keys(n.env).sort()) {
        env.push(`${k}=${n.env[k]}`);
    }
    return env;
}

/** The step that removes every container of `stack` from node `node` (the Roster's eviction of a host leaving the stack). */
export function stackContainersRemoveStep(node: string, stack: string): RemoteStep {
    return { what: `clearing node ${node}`, script: "remove_stack_containers.sh", args: [`label=${LABEL.stack}`, `stack=${stack}`] };
}

/**
 * What clearing a host that left the cluster removes: for DEFAULT_CLUSTER, every container of the stack (as every
 * release did, which is why that cluster shares a program with no other); for any other cluster, the containers
 * carrying its name (LABEL.cluster), which its container names already make one set per host.
 */
export function clusterContainersRemoveStep(node: string, stack: string, cluster: string): RemoteStep {
    if (cluster === DEFAULT_CLUSTER) return stackContainersRemoveStep(node, stack);
    return { what: `clearing node ${node}`, script: "remove_stack_containers.sh", args: [`label=${LABEL.cluster}`, `stack=${cluster}`] };
}

/** The state directory of the cluster named `cluster`: stateDir itself for DEFAULT_CLUSTER, `<stateDir>/clusters/<cluster>` for any other. */
export function clusterStateDir(stateDir: string, cluster: string): string {
    return cluster === DEFAULT_CLUSTER ? stateDir : `${stateDir}/clusters/${cluster}`;
}

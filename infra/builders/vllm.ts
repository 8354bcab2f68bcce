/** The `vllm serve` command lines of both backends and the entrypoint that hands the server its key. */
import { createHash } from "crypto";
import type { ModelConfig, NodeConfig, ServeConfig } from "../config";
import { API_KEY_CONTAINER_PATH, TLS_CERT_CONTAINER_PATH, TLS_KEY_CONTAINER_PATH, nodeEnv } from "./node";
import { base64, scriptFile, shippedScriptArgv } from "./remoteStep";

/** Where the model is inside the container and the name it is served under. */
export type ServedModel = Pick<ModelConfig, "containerPath" | "servedName">;

/** Exit status of the serve entrypoint when there is no usable API key (EX_CONFIG). */
export const NO_API_KEY_EXIT = 78;

/**
 * The serve container's entrypoint (infra/scripts/serve_entrypoint.sh, shipped by content): fails closed without a
 * key file, and loads the guard (infra/scripts/vllm_cluster_guard.py, one base64 argument) with --middleware. The
 * guard puts the key on every route but health, metrics and version: vLLM's own --api-key leaves /invocations,
 * /tokenize, /scale_elastic_ep and more open. It works with any vLLM image; the key is in no process's environment.
 */
export const SERVE_ENTRYPOINT = shippedScriptArgv("serve_entrypoint.sh", [
    `key-file=${API_KEY_CONTAINER_PATH}`,
    "guard-dir=/run/vllm-cluster-guard.XXXXXX",
    `guard=${base64(scriptFile("vllm_cluster_guard.py").text)}`,
    "--",
]);

/**
 * `vllm serve <model> --flag value ...`, each flag and value its own element; `distributed` (the executor backend
 * and, for the native backend, the multi-node flags) goes right after the parallelism it serves.
 */
function serveArgv(s: ServeConfig, model: ServedModel, distributed: string[]): string[] {
    const cmd = [
        "vllm",
        "serve",
        model.containerPath,
        "--served-model-name",
        model.servedName,
        "--host",
        s.host,
        "--port",
        String(s.port),
        // HTTPS with the files the program installed on the head (serve.tls): the key never crosses in clear
        ...(s.tls ? ["--ssl-certfile", TLS_CERT_CONTAINER_PATH, "--ssl-keyfile", TLS_KEY_CONTAINER_PATH] : []),
        "--tensor-parallel-size",
        String(s.tensorParallelSize),
        "--pipeline-parallel-size",
        String(s.pipelineParallelSize),
        ...distributed,
        "--gpu-memory-utilization",
        String(s.gpuMemoryUtilization),
    ];
    if (s.maxModelLen !== undefined) {
        cmd.push("--max-model-len", String(s.maxModelLen));
    }
    if (s.reasoningParser !== undefined) {
        cmd.push("--reasoning-parser", s.reasoningParser);
    }
    if (s.toolCallParser !== undefined) {
        cmd.push("--tool-call-parser", s.toolCallParser);
    }
    if (s.enableAutoToolChoice) {
        cmd.push("--enable-auto-tool-choice");
    }
    if (s.trustRemoteCode) {
        cmd.push("--trust-remote-code");
    }
    if (s.loadFormat !== undefined) {
        cmd.push("--load-format", s.loadFormat);
    }
    return [...cmd, ...s.extraArgs];
}

/** `vllm serve <model> --flag value ...` for the ray backend, each flag and value its own element. */
export function serveCommand(s: ServeConfig, model: ServedModel): string[] {
    // Without it a multi-node TP run does not use the Ray cluster (seeds' second failure).
    return serveArgv(s, model, ["--distributed-executor-backend", "ray"]);
}

/** One rank of the native backend: which node it is and where rank 0's rendezvous listens. */
export interface NativeRank {
    /** 0 on the head (serves the API), 1..nnodes-1 on the other nodes in config order (headless). */
    nodeRank: number;
    nnodes: number;
    /** The head's fabric IP. */
    masterAddr: string;
    masterPort: number;
}

/**
 * `vllm serve` for vLLM's own multi-node without Ray (backend native). Every node runs the same serve command with
 * its own `--node-rank`; TP x PP spans all nodes' GPUs exactly as with Ray. Rank 0 serves the API, every other
 * rank runs `--headless` (engine only, no API server) and joins rank 0 at `--master-addr`/`--master-port`.
 * vLLM docs, "Parallelism and Scaling", section "Running vLLM with MultiProcessing":
 * https://docs.vllm.ai/en/latest/serving/parallelism_scaling.html (example: `--tensor-parallel-size 8
 * --pipeline-parallel-size 2 --nnodes 2 --node-rank 0 --master-addr <HEAD_NODE_IP>` on the head, the same with
 * `--node-rank 1 ... --headless` on the other node). `--master-port` is the matching engine argument for the
 * rendezvous port; it is always passed so the port checked by config validation and the policy pack is the one
 * used. `--distributed-executor-backend mp` is passed explicitly so an image that does ship Ray is not steered to it.
 */
export function nativeServeCommand(s: ServeConfig, model: ServedModel, r: NativeRank): string[] {
    const distributed = [
        "--distributed-executor-backend",
        "mp",
        "--nnodes",
        String(r.nnodes),
        "--node-rank",
        String(r.nodeRank),
        "--master-addr",
        r.masterAddr,
        "--master-port",
        String(r.masterPort),
    ];
    if (r.nodeRank > 0) {
        distributed.push("--headless");
    }
    // a headless rank serves no API: it gets no TLS files and no TLS flags
    return serveArgv(r.nodeRank > 0 ? { ...s, tls: undefined } : s, model, distributed);
}

/** Explicit entrypoint for headless ranks (no API, so no key): an image's own entrypoint never runs. */
export const HEADLESS_ENTRYPOINT = ["/usr/bin/env"];

/**
 * The native backend's counterpart of the Ray cluster fingerprint: a hash of every rank's container ID, so it
 * changes exactly when any rank's container was replaced.
 */
export function joinFingerprint(rankContainerIds: readonly string[]): string {
    return createHash("sha256").update(rankContainerIds.join("\n")).digest("hex").slice(0, 16);
}

/** Serve runs on the head host as a Ray driver: it needs the head's env plus the Ray address. */
export function serveEnv(head: NodeConfig, rayAddress: string): string[] {
    return [...nodeEnv(head), `RAY_ADDRESS=${rayAddress}`];
}

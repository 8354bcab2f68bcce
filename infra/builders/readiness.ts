/** The serve readiness check: /health, one real chat completion with the key, and a 401 without it. */
import type { ModelConfig, ServeConfig } from "../config";
import { CONTAINER } from "../contract";
import { initStatusHostPath } from "./containerInit";
import { apiKeyHostPath } from "./node";
import { RemoteStep, remoteStepCommand } from "./remoteStep";
import type { SshTarget } from "./ssh";

export interface ServeReadinessSpec {
    node: string;
    port: number;
    servedName: string;
    apiKeyFile: string;
    /** Where the server's init writes its verdict (an OOM kill, the memory guard, the crash budget used up). */
    statusFile: string;
    timeoutSeconds: number;
    /** Seconds between /health polls (default 1: a local curl; the server answers the moment it is up). */
    intervalSeconds?: number;
    /** The server speaks HTTPS (serve.tls). */
    tls?: boolean;
    /** The serve container's name on the node (containerNames; unset: the default cluster's). */
    container?: string;
}

/** The readiness check for serve on `node`: its port and model name, the key file the install wrote. */
export function serveReadinessSpec(
    node: string,
    serve: Pick<ServeConfig, "port">,
    model: Pick<ModelConfig, "servedName">,
    stateDir: string,
    timeoutSeconds: number,
    tls = false,
    container: string = CONTAINER.serve,
): ServeReadinessSpec {
    return {
        node,
        port: serve.port,
        servedName: model.servedName,
        apiKeyFile: apiKeyHostPath(stateDir, node),
        statusFile: initStatusHostPath(stateDir, node, container),
        timeoutSeconds,
        tls,
        ...(container !== CONTAINER.serve ? { container } : {}),
    };
}

/** The readiness step (infra/scripts/serve_readiness.bash) for serve on the head. */
export function serveReadinessStep(s: ServeReadinessSpec): RemoteStep {
    const body = JSON.stringify({
        model: s.servedName,
        messages: [{ role: "user", content: "Reply with the single word: ready" }],
        max_tokens: 8,
        temperature: 0,
    });
    const args = [
        `node=${s.node}`,
        `container=${s.container ?? CONTAINER.serve}`,
        `port=${s.port}`,
        `key-file=${s.apiKeyFile}`,
        `status-file=${s.statusFile}`,
        `timeout=${s.timeoutSeconds}`,
        `body=${body}`,
        ...(s.intervalSeconds !== undefined ? [`interval=${s.intervalSeconds}`] : []),
        ...(s.tls ? ["tls=yes"] : []),
    ];
    return { what: `serve readiness on node ${s.node}`, script: "serve_readiness.bash", args };
}

export function serveReadinessCommand(t: SshTarget, s: ServeReadinessSpec): string {
    return remoteStepCommand(t, serveReadinessStep(s));
}

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
    /** A look at a running server (refresh), not the wait after a container was made: it reports no launch. */
    look?: boolean;
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
        ...(s.look ? ["mode=look"] : []),
    ];
    return { what: `serve readiness on node ${s.node}`, script: "serve_readiness.bash", args };
}

export function serveReadinessCommand(t: SshTarget, s: ServeReadinessSpec): string {
    return remoteStepCommand(t, serveReadinessStep(s));
}

/** What the last start of the server took, as its readiness wait measured it (a field is absent until one recorded it). */
export interface LaunchTimings {
    /** Seconds from the serve container's start to the answer of the first chat completion (with the key). */
    readySeconds?: number;
    /** Seconds that first chat completion took. */
    firstCompletionSeconds?: number;
    /** Seconds `pulumi up` waited for the server to be ready. */
    waitedSeconds?: number;
    /** When the serve container started (docker's timestamp, UTC). */
    startedAt?: string;
}

const STARTED_AT = /^\d{4}-\d{2}-\d{2}T[0-9:.]+Z$/;

/**
 * The launch timings as far as they can be trusted: only finite, non-negative numbers and docker's timestamp form are
 * taken from `l` (a host's line, or a stack output it fed); anything else is left out.
 */
export function cleanLaunch(l: unknown): LaunchTimings {
    if (l === null || typeof l !== "object" || Array.isArray(l)) return {};
    const o = l as Record<string, unknown>;
    const out: LaunchTimings = {};
    for (const k of ["readySeconds", "firstCompletionSeconds", "waitedSeconds"] as const) {
        const v = o[k];
        if (typeof v === "number" && Number.isFinite(v) && v >= 0) out[k] = v;
    }
    if (typeof o.startedAt === "string" && STARTED_AT.test(o.startedAt)) out.startedAt = o.startedAt;
    return out;
}

/**
 * The serve watchdog's last restart of the running server, as the readiness check's last line (a wait, or a refresh's
 * look) reported it: "<UTC time> <what it found>", printable text of at most 300 characters; "none" without one.
 */
export function watchdogEvent(result: string | undefined): string {
    try {
        const parsed: unknown = JSON.parse(result ?? "");
        const w = parsed !== null && typeof parsed === "object" ? (parsed as Record<string, unknown>).watchdog : undefined;
        if (typeof w === "string") {
            // eslint-disable-next-line no-control-regex
            const clean = w.replace(/[\u0000-\u001f\u007f-\u009f\u2028\u2029\u200b-\u200f\u202a-\u202e\u2066-\u2069]/g, "").slice(0, 300);
            if (clean !== "") return clean;
        }
    } catch {
        // not a line the script wrote: no event from it
    }
    return "none";
}

/** The launch timings from the readiness wait's last line (serve_readiness.bash) and the wait's duration. */
export function launchTimings(waitResult: string | undefined, waitedSeconds: number | undefined): LaunchTimings {
    let line: Record<string, unknown> = {};
    try {
        const parsed: unknown = JSON.parse(waitResult ?? "");
        if (parsed !== null && typeof parsed === "object" && !Array.isArray(parsed)) line = parsed as Record<string, unknown>;
    } catch {
        // not a line the script wrote (an older state's, or none): no figures from it
    }
    return cleanLaunch({
        readySeconds: line.readySeconds,
        firstCompletionSeconds: line.completionSeconds,
        waitedSeconds,
        startedAt: line.startedAt,
    });
}

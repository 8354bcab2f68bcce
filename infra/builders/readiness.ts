/** The serve readiness check: /health, one real chat completion with the key, and a 401 without it. */
import type { ModelConfig, ServeConfig } from "../config";
import { CONTAINER } from "../contract";
import { apiKeyHostPath } from "./node";
import { shellQuote } from "./quote";
import { SshTarget, remoteScriptCommand } from "./ssh";

export interface ServeReadinessSpec {
    node: string;
    port: number;
    servedName: string;
    apiKeyFile: string;
    timeoutSeconds: number;
    /** Seconds between /health polls (default 1: a local curl; the server answers the moment it is up). */
    intervalSeconds?: number;
    /** The server speaks HTTPS (serve.tls). */
    tls?: boolean;
}

/** The readiness check for serve on `node`: its port and model name, the key file the install wrote. */
export function serveReadinessSpec(
    node: string,
    serve: Pick<ServeConfig, "port">,
    model: Pick<ModelConfig, "servedName">,
    stateDir: string,
    timeoutSeconds: number,
    tls = false,
): ServeReadinessSpec {
    return { node, port: serve.port, servedName: model.servedName, apiKeyFile: apiKeyHostPath(stateDir, node), timeoutSeconds, tls };
}

/**
 * bash script run on the head host: poll /health (bounded; fails early if the container died), then send one
 * real chat completion authenticated with the key read from the key file. The Authorization header reaches
 * curl through a config file on a process substitution, so the key is never on a command line.
 */
export function serveReadinessScript(s: ServeReadinessSpec): string {
    const q = shellQuote;
    const body = JSON.stringify({
        model: s.servedName,
        messages: [{ role: "user", content: "Reply with the single word: ready" }],
        max_tokens: 8,
        temperature: 0,
    });
    const where = `${CONTAINER.serve} on node ${s.node}`;
    return [
        "set -uo pipefail",
        `base=${q(`${s.tls ? "https" : "http"}://127.0.0.1:${s.port}`)}`,
        // over loopback on the head itself: the certificate names the address clients use, not 127.0.0.1
        ...(s.tls ? ['curl() { command curl --insecure "$@"; }'] : []),
        `keyfile=${q(s.apiKeyFile)}`,
        `deadline=$(( $(date +%s) + ${s.timeoutSeconds} ))`,
        `logs() { docker logs --tail 12 ${CONTAINER.serve} 2>&1 | sed 's/^/  | /' >&2 || true; }`,
        // The server's last log lines first, then the verdict: the error's last line always says what failed.
        `fail() { logs; echo "${where}: $*" >&2; exit 1; }`,
        `auth() { printf 'header = "Authorization: Bearer %s"\\n' "$(cat "$keyfile")"; }`,
        `[ -r "$keyfile" ] || fail "API key file $keyfile is missing or unreadable"`,
        `code=000`,
        `while :; do`,
        `  code=$(curl -s -o /dev/null -w '%{http_code}' --max-time 5 "$base/health" || true)`,
        `  [ "$code" = 200 ] && break`,
        `  state=$(docker inspect -f '{{.State.Status}}' ${CONTAINER.serve} 2>/dev/null || echo missing)`,
        `  case "$state" in exited|dead|missing) fail "container is $state before /health answered";; esac`,
        `  [ "$(date +%s)" -lt "$deadline" ] || fail "/health did not return 200 within ${s.timeoutSeconds}s (last HTTP $code, container $state)"`,
        `  sleep ${s.intervalSeconds ?? 1}`,
        `done`,
        `left=$(( deadline - $(date +%s) )); [ "$left" -ge 30 ] || left=30`,
        `resp=$(curl -sS --max-time "$left" -K <(auth) -H 'Content-Type: application/json' -d ${q(body)} -w '\\n%{http_code}' "$base/v1/chat/completions") || fail "chat completion request failed"`,
        `code=\${resp##*$'\\n'}`,
        `[ "$code" = 200 ] || fail "chat completion returned HTTP $code"`,
        `case "$resp" in *'"choices"'*) ;; *) fail "chat completion answer has no choices";; esac`,
        // Fail closed: a server that answers without the key is not ready, it is open.
        `code=$(curl -s -o /dev/null -w '%{http_code}' --max-time 30 -H 'Content-Type: application/json' -d ${q(body)} "$base/v1/chat/completions" || true)`,
        `[ "$code" = 401 ] || fail "a chat completion without the API key returned HTTP $code, not 401: the server does not enforce its key"`,
        `printf '{"ready":true,"node":"%s","port":%s}\\n' ${q(s.node)} ${s.port}`,
    ].join("\n");
}

export function serveReadinessCommand(t: SshTarget, s: ServeReadinessSpec): string {
    return remoteScriptCommand(t, `serve readiness on node ${s.node}`, serveReadinessScript(s), "bash");
}

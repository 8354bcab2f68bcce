/** `serve`: the `vllm serve` settings and how the serve container runs; the one serve shape every part uses. */
import { z } from "zod";
import {
    bool,
    fraction,
    int,
    ipv4,
    isObject,
    item,
    list,
    optional,
    pattern,
    port,
    quotablePath,
    positiveInt,
    seconds,
    section,
    size,
    token,
    withDefault,
} from "./fields";
import { evenIfInvalid, problem, validFields } from "./rules";
import { canonicalFlag, mayBeFlag } from "../vllmFlags";

/**
 * vllm serve flags the program sets itself; repeating one in serve.extraArgs would silently override (or
 * contradict) the managed value, so validation rejects it.
 */
export const MANAGED_SERVE_FLAGS: readonly string[] = [
    "--model",
    "--served-model-name",
    "--host",
    "--port",
    "--api-key",
    "--tensor-parallel-size",
    "-tp",
    "--pipeline-parallel-size",
    "-pp",
    "--distributed-executor-backend",
    "--gpu-memory-utilization",
    "--max-model-len",
    "--reasoning-parser",
    "--tool-call-parser",
    "--enable-auto-tool-choice",
    "--trust-remote-code",
    "--load-format",
    // TLS (serve.tls): the program ships the files and passes their container paths
    "--ssl-keyfile",
    "--ssl-certfile",
    // native backend (vLLM's multi-node without Ray)
    "--nnodes",
    "--node-rank",
    "--master-addr",
    "--master-port",
    "--headless",
];

const SHM_RE = /^[1-9]\d*[bkmg]?$/i;

/**
 * The managed flag (or the reason) an extraArgs element would set, however it is spelled: `_` for `-`, an
 * abbreviation (`--ho`, `--headl`, `-t`), `=value` or not. `--config` names a file whose keys set any flag, managed
 * ones included, and `--` would turn what follows into positional arguments (the model): both are refused whole.
 */
export function managedFlagOf(arg: string): string | undefined {
    const f = canonicalFlag(arg);
    if (f === "--") {
        return "-- (the end of options)";
    }
    if (f === "--config") {
        return "--config (a file of serve arguments)";
    }
    return MANAGED_SERVE_FLAGS.find((m) => mayBeFlag(arg, m));
}

/** The message names the flag, never the element: it may carry a secret (an API key passed by mistake). */
const extraArg = item().superRefine((arg, ctx) => {
    const managed = managedFlagOf(arg);
    if (managed !== undefined) {
        const spelled = canonicalFlag(arg);
        ctx.addIssue({
            code: "custom",
            message:
                spelled === managed || managed.startsWith(`${spelled} `)
                    ? `${managed} is managed by the program; set it through its own key (value not shown)`
                    : `${spelled} would set ${managed} (vLLM reads _ as - and takes any unambiguous prefix), which is managed by ` +
                      "the program; set it through its own key (value not shown)",
        });
    }
});

/**
 * The API's TLS certificate and its private key, PEM files on the operator's machine (`~/` is the operator's home):
 * the program installs them on the head (the key mode 600 in the node's state directory) and vLLM serves HTTPS.
 * The key file must be readable by its owner only, as ssh insists for its keys.
 */
const tlsFields = {
    certFile: quotablePath(),
    keyFile: quotablePath(),
};

export const serveFields = {
    port: port(8000),
    /**
     * The address the API binds to on the head (0.0.0.0: every interface). Off loopback and the head's fabric IP,
     * the policy pack requires serve.tls: the bearer key would otherwise cross the network in clear.
     */
    host: withDefault(ipv4(), "0.0.0.0"),
    /** HTTPS for the API (see tlsFields); unset: plain HTTP. */
    tls: section(tlsFields).optional(),
    /** TP x PP must equal the cluster's GPUs: vLLM places exactly one worker per GPU. */
    tensorParallelSize: positiveInt(),
    pipelineParallelSize: positiveInt().default(1),
    gpuMemoryUtilization: fraction(0.9),
    maxModelLen: positiveInt().optional(),
    reasoningParser: optional(token("parser name")),
    toolCallParser: optional(token("parser name")),
    enableAutoToolChoice: bool(false),
    trustRemoteCode: bool(false),
    loadFormat: optional(token("load format")),
    /** Further `vllm serve` arguments, for what has no key here; flags the program manages are rejected. */
    extraArgs: list(extraArg),
    /** Container /dev/shm size, docker syntax (e.g. 64g); unset keeps the engine default. */
    shmSize: optional(pattern(SHM_RE, "size (e.g. 64g)")),
    /** Loading a large model from disk can take many minutes before the API answers. */
    readyTimeoutSeconds: seconds().default(1800),
    /**
     * Restarts of a server that fails before it becomes healthy, then its container stays stopped; counted on the
     * host's disk, so an engine restart or a reboot in the middle of a crash loop does not start the count again.
     */
    maxRestarts: int({ min: 0, max: 100 }).default(3),
    /** The serve containers' own memory ceiling (docker syntax, e.g. 100g); unset: memoryGuard's. */
    memoryLimit: optional(size(64 * 1024 ** 2)),
};

export const serveSchema = section(serveFields).superRefine((serve: unknown, ctx) => {
    // vLLM refuses --enable-auto-tool-choice without a parser; a parser that is set but malformed is its own problem.
    const { enableAutoToolChoice } = validFields(serveFields, serve);
    if (enableAutoToolChoice && isObject(serve) && serve.toolCallParser === undefined) {
        problem(ctx, ["enableAutoToolChoice"], "requires serve.toolCallParser");
    }
}, evenIfInvalid);

export type ServeConfig = z.output<typeof serveSchema>;

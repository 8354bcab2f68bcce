/** `serve`: the `vllm serve` settings and how the serve container runs; the one serve shape every part uses. */
import { z } from "zod";
import {
    optionalSection,
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
    string,
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

/** A /dev/shm size in docker's syntax (serve.shmSize, ray.shmSize). */
export const SHM_RE = /^[1-9]\d*[bkmg]?$/i;

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
const extraArg = item()
    .superRefine((arg, ctx) => {
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
    })
    .meta({
        rule:
            `a non-empty string; no flag the program manages, however vLLM would read it (_ for -, any unambiguous prefix): ` +
            `${MANAGED_SERVE_FLAGS.join(", ")}; no --config, no --`,
    });

/**
 * The API's TLS certificate and its private key, each either a PEM file on the operator's machine or the PEM text
 * itself as stack config (the key as a secret), so that a machine without the files (a GitOps runner) can preview and
 * deploy: the program installs them on the head (the key mode 600 in the node's state directory) and vLLM serves
 * HTTPS. Texts are never shown in an error.
 */
const TLS_ONCE = (what: string, text: string, file: string) => `exactly one of serve.tls.${file} and serve.tls.${text} (${what})`;
const tlsFields = {
    certFile: optional(quotablePath()).meta({
        description: "The certificate (chain), a PEM file on the operator's machine; clients must trust it.",
        across: TLS_ONCE("the certificate", "cert", "certFile"),
    }),
    keyFile: optional(quotablePath()).meta({
        description: "Its private key, a PEM file on the operator's machine, readable by its owner only (as ssh insists for its keys).",
        across: TLS_ONCE("the private key", "key", "keyFile"),
    }),
    cert: optional(string()).meta({
        description:
            "The certificate (chain) itself, PEM text, for a machine without the file (a GitOps runner): " +
            "`pulumi config set --path serve.tls.cert < cert.pem`.",
        across: TLS_ONCE("the certificate", "cert", "certFile"),
    }),
    key: optional(string()).meta({
        description:
            "Its private key itself, PEM text, taken only as a secret: `pulumi config set --secret --path serve.tls.key < key.pem`.",
        across: TLS_ONCE("the private key", "key", "keyFile"),
    }),
};

/** Each of the certificate and the key given exactly once: as a file or as config. */
const tlsSchema = section(tlsFields).superRefine((tls: unknown, ctx) => {
    const given = isObject(tls) ? tls : {};
    const once = (text: "cert" | "key", file: "certFile" | "keyFile", what: string, set: string) => {
        const [t, f] = [given[text] !== undefined && given[text] !== "", given[file] !== undefined && given[file] !== ""];
        if (t && f) problem(ctx, [text], `give ${what} once: serve.tls.${text} or serve.tls.${file}, not both`);
        if (!t && !f) problem(ctx, [file], `is required: ${what} as a file (serve.tls.${file}) or as ${set} (serve.tls.${text})`);
    };
    once("cert", "certFile", "the certificate", "config");
    once("key", "keyFile", "the private key", "secret config");
}, evenIfInvalid);

const TP_PP = "tensorParallelSize x pipelineParallelSize = the GPUs of all nodes (vLLM places one worker per GPU)";
const PORT_CLASH =
    "distinct from every other port opened on the head (nodes[].sshPort, the backend's ports); outside " +
    "ray.minWorkerPort..maxWorkerPort (backend ray)";

/**
 * `serve.watchdog`: a script in front of the server (infra/scripts/serve_watchdog.sh) sends one real chat completion
 * with the key every intervalSeconds once the server is healthy, and restarts the server when it stopped answering: a hung engine
 * keeps /health at 200, only a completion proves service. Part of the serve container's start: a change restarts the
 * server (the preview shows it). Backend ray only: with backend native a rank 0 restarted alone does not bring the
 * headless ranks back.
 */
const watchdogFields = {
    enabled: bool(true).describe("Whether the watchdog runs; without it a hung server is noticed only by the next `pulumi refresh`."),
    intervalSeconds: seconds().default(30).describe("Seconds between the watchdog's completions (once the server is healthy)."),
    timeoutSeconds: seconds()
        .default(30)
        .describe(
            "How long one completion may take. A completion that times out while the server generates tokens for others " +
                "(vllm:generation_tokens_total grows) is busy, not hung, and does not count; nor does an answer that is no " +
                "completion (HTTP 4xx).",
        ),
    failures: int({ min: 1, max: 100 })
        .default(3)
        .describe(
            "Completions missed in a row (no answer within timeoutSeconds, no connection, HTTP 5xx) before the server is " +
                "restarted in place (a start of the crash budget); after serve.maxRestarts such restarts with no answered " +
                "completion in between, the container stays stopped.",
        ),
};

export const serveFields = {
    port: port(8000).meta({ description: "The API's port on the head.", across: PORT_CLASH }),
    host: withDefault(ipv4(), "0.0.0.0").describe(
        "The address the API binds to on the head (0.0.0.0: every interface); off loopback and the head's fabric IP the " +
            "policy pack requires serve.tls, since the bearer key would otherwise cross the network in clear.",
    ),
    tls: tlsSchema
        .optional()
        .describe("HTTPS for the API: the program installs the certificate and key on the head and vLLM serves HTTPS; unset: plain HTTP."),
    tensorParallelSize: positiveInt().meta({ description: "vLLM's --tensor-parallel-size.", across: TP_PP }),
    pipelineParallelSize: positiveInt().default(1).meta({ description: "vLLM's --pipeline-parallel-size.", across: TP_PP }),
    gpuMemoryUtilization: fraction(0.9).describe(
        "vLLM's --gpu-memory-utilization: the share of the GPU's memory vLLM may take (the policy pack bounds it).",
    ),
    maxModelLen: positiveInt().optional().describe("vLLM's --max-model-len; unset: the model's own."),
    reasoningParser: optional(token("parser name")).describe("vLLM's --reasoning-parser."),
    toolCallParser: optional(token("parser name")).describe("vLLM's --tool-call-parser."),
    enableAutoToolChoice: bool(false).meta({ description: "vLLM's --enable-auto-tool-choice.", across: "requires serve.toolCallParser" }),
    trustRemoteCode: bool(false).describe("vLLM's --trust-remote-code: run the model repository's own Python code."),
    loadFormat: optional(token("load format")).describe("vLLM's --load-format."),
    extraArgs: list(extraArg).describe("Further `vllm serve` arguments, for what has no key here, each element one argument."),
    shmSize: optional(pattern(SHM_RE, "size (e.g. 64g)")).describe(
        "The serve containers' /dev/shm size, docker syntax; unset keeps the engine's default. The Ray containers take it too " +
            "while ray.shmSize is unset (for this release; the program warns).",
    ),
    readyTimeoutSeconds: seconds()
        .default(1800)
        .describe("How long `up` waits for the API to answer a chat completion: loading a large model can take many minutes."),
    maxRestarts: int({ min: 0, max: 100 })
        .default(3)
        .describe(
            "Restarts of a server that fails before it becomes healthy, then its container stays stopped; counted on the host's " +
                "disk, so an engine restart or a reboot in the middle of a crash loop does not start the count again. The Ray " +
                "containers take it too while ray.maxRestarts is unset (for this release; the program warns when it is not 3).",
        ),
    memoryLimit: optional(size(64 * 1024 ** 2)).describe("The serve containers' own memory ceiling; unset: memoryGuard's."),
    watchdog: optionalSection(section(watchdogFields)).describe(
        "The watchdog that restarts a server that lives but stopped answering (a hung engine), within its crash budget. " +
            "Backend ray only: with backend native a rank 0 restarted alone does not bring its headless ranks back, so there " +
            "a hung server needs `pulumi up --replace` of rank 0, which restarts every rank.",
    ),
};

export const serveSchema = section(serveFields).superRefine((serve: unknown, ctx) => {
    // vLLM refuses --enable-auto-tool-choice without a parser; a parser that is set but malformed is its own problem.
    const { enableAutoToolChoice } = validFields(serveFields, serve);
    if (enableAutoToolChoice && isObject(serve) && serve.toolCallParser === undefined) {
        problem(ctx, ["enableAutoToolChoice"], "requires serve.toolCallParser");
    }
}, evenIfInvalid);

export type ServeConfig = z.output<typeof serveSchema>;

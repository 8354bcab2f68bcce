/** The smaller sections: image, model, ray, native and ssh. */
import * as path from "path";
import { z } from "zod";
import {
    absPath,
    hostDir,
    int,
    oneOf,
    optional,
    optionalSection,
    pattern,
    port,
    quotablePath,
    seconds,
    size,
    required,
    scalarText,
    section,
    string,
    token,
    withDefault,
} from "./fields";
import { SHM_RE } from "./serve";
import { evenIfInvalid, problem, validFields } from "./rules";

export const IMAGE_REF_RE = /^[A-Za-z0-9][A-Za-z0-9._\-/:@]*$/;

const BUILD_ARG_RE = /^[A-Za-z_][A-Za-z0-9_]*$/;

/** A path relative to `where`, which cannot leave it by its spelling (absolute, or `..` past its top). */
const relativeInside = (where: string) =>
    quotablePath()
        .refine((v) => !path.posix.isAbsolute(v) && !path.posix.normalize(v).startsWith(".."), {
            error: (iss) => `${JSON.stringify(iss.input)} must be a relative path inside ${where} (no absolute path, no .. out of it)`,
        })
        .meta({ rule: `a relative path inside ${where}, without spaces or quotes` });

/**
 * `image.build`: the image is built on `image.sourceNode` by that host's own Docker engine (the Docker provider's
 * Image over the node's ssh:// connection) and tagged `image.ref`; the chain then copies it to the other hosts.
 */
export const imageBuildFields = {
    context: required(relativeInside("the project directory")).describe(
        "The build context on the machine running Pulumi, relative to the project directory and inside it: everything in it " +
            "is sent to the source node's engine, so never `/`, a home directory or the runner's other files.",
    ),
    dockerfile: withDefault(relativeInside("the build context"), "Dockerfile").describe(
        "The Dockerfile, relative to the context and inside it.",
    ),
    args: z
        .record(
            z
                .string()
                .regex(BUILD_ARG_RE, { error: "is not a valid build argument name" })
                .meta({ rule: `\`${BUILD_ARG_RE.source}\`` }),
            z.preprocess(scalarText, z.string({ error: "must be a string" })).meta({ rule: "text (numbers and booleans as their text)" }),
            { error: (iss) => (iss.code === "invalid_key" ? iss.issues[0]?.message : "must be a map of build argument names to values") },
        )
        .default(() => ({}))
        .describe("Build arguments (`--build-arg`): recorded in the state and the image's history in clear, so never secrets."),
};

export const imageFields = {
    ref: required(pattern(IMAGE_REF_RE, "image reference")).describe(
        "The image every container runs (a digest pins it); each host's containers are made from that host's own image ID.",
    ),
    source: withDefault(oneOf(["host", "local", "registry"]), "host").describe(
        "host: already on `sourceNode` and streamed to the others; local: on the operator's engine; registry: each host pulls it.",
    ),
    sourceNode: optional(string()).meta({
        description: "The node that holds (or builds) the image; the head when unset.",
        across: "one of nodes[].name; only with source: host",
    }),
    distribution: withDefault(oneOf(["chain", "relay"]), "chain").describe(
        "chain: hosts load and forward the stream at once (source -> first -> second ...), so N hosts cost about one copy and " +
            "no image byte crosses the operator; hosts must reach each other's ssh and allow agent forwarding. relay: one " +
            "stream per host through the operator (source: host) or from it (source: local). Unused with registry.",
    ),
    build: optional(section(imageBuildFields)).meta({
        description: "Build the image on the source node from a Dockerfile instead of finding it there.",
        across: "only with source: host",
    }),
};

export const imageSchema = section(imageFields).superRefine((image: unknown, ctx) => {
    const { source, sourceNode, build } = validFields(imageFields, image);
    if (source !== undefined && source !== "host" && sourceNode !== undefined) {
        problem(ctx, ["sourceNode"], `only valid with image.source=host (source is ${source})`);
    }
    if (source !== undefined && source !== "host" && build !== undefined) {
        problem(ctx, ["build"], `only valid with image.source=host: the image is built on image.sourceNode (source is ${source})`);
    }
}, evenIfInvalid);

export type ImageConfig = z.output<typeof imageSchema>;
export type ImageSource = ImageConfig["source"];

export const modelFields = {
    hostPath: required(hostDir()).meta({
        description: "The model directory, at the same path on every host; mounted read-only.",
        across: "apart from stateDir: neither inside the other",
    }),
    containerPath: optional(absPath()).describe("Where vLLM sees the model; /models/<basename of hostPath> when unset."),
    servedName: required(token("served model name")).describe("The name clients ask for (the API's `model`)."),
    source: optional(string()).meta({
        description:
            "The node that holds the model directory: it is copied to the other nodes along a chain, like the image, and the " +
            "containers restart when its content changes. Unset: the model is already in place on every host (with hub: " +
            "the image's source node downloads it).",
        across: "one of nodes[].name",
    }),
};

/** A Hub repository id: `owner/name`, as the Hub spells them. */
const HUB_REPO_RE = /^[A-Za-z0-9][A-Za-z0-9._-]{0,95}\/[A-Za-z0-9][A-Za-z0-9._-]{0,95}$/;
/** A commit hash, a branch or a tag (the policy pack flags anything but a full commit hash: hub-revision-pinned). */
const HUB_REVISION_RE = /^[A-Za-z0-9][A-Za-z0-9._/-]{0,199}$/;

/**
 * `model.hub`: the model is downloaded once, on the source node, from the Hugging Face Hub (huggingface_hub inside
 * the cluster's image), then copied to the other nodes along the model chain. A token, when the repo needs one, is
 * the secret config key `hfToken`.
 */
export const hubFields = {
    repo: required(pattern(HUB_REPO_RE, "Hub repository (owner/name)")).describe(
        "The model's repository on the Hub; resolved from the operator's machine before any host is changed.",
    ),
    revision: required(pattern(HUB_REVISION_RE, "revision (a commit hash, or a branch or tag name)")).describe(
        "Pin a commit hash: a branch or tag moves under a deployed stack (the policy hub-revision-pinned flags one).",
    ),
    endpoint: optional(
        pattern(/^https?:\/\/[A-Za-z0-9.-]+(:\d{1,5})?(\/[A-Za-z0-9._~\/-]*)?$/, "Hub endpoint URL (http(s)://host[:port][/path])"),
    ).describe("The Hub's address; unset: the client's own default (HF_ENDPOINT in the operator's environment, else the Hub)."),
};

export const modelSchema = section({
    ...modelFields,
    hub: optional(section(hubFields)).describe(
        "Download the model once, on model.source, from the Hugging Face Hub (huggingface_hub in the cluster's image), then " +
            "copy it along the model chain; a token is the secret key hfToken.",
    ),
}).transform((m) => ({
    hostPath: m.hostPath,
    containerPath: m.containerPath ?? `/models/${path.posix.basename(m.hostPath)}`,
    servedName: m.servedName,
    source: m.source,
    hub: m.hub,
}));

export type ModelConfig = z.output<typeof modelSchema>;

/**
 * The ports Ray opens are all pinned (Ray picks most at random otherwise), so the port contract, preflight and the
 * policy pack know every one.
 */
const RAY_PORT = "distinct from every other port opened on the same host; outside ray.minWorkerPort..maxWorkerPort";
const rayPort = (def: number, description: string) => port(def).meta({ description, across: RAY_PORT });

/** Read and validated for every backend; only the ray backend uses it. */
export const rayFields = {
    gcsPort: rayPort(6379, "The head's GCS port, which the workers join."),
    dashboardPort: rayPort(
        8265,
        "The Ray dashboard's port, on the head's loopback only (pulumi stack output rayDashboard: the ssh tunnel).",
    ),
    clientPort: rayPort(10001, "The head's Ray client port."),
    nodeManagerPort: rayPort(6380, "The raylet's port, on every Ray host."),
    objectManagerPort: rayPort(6381, "The object manager's port, on every Ray host."),
    runtimeEnvAgentPort: rayPort(6382, "The runtime-env agent's port, on every Ray host."),
    dashboardAgentGrpcPort: rayPort(6383, "The dashboard agent's gRPC port, on every Ray host."),
    metricsExportPort: rayPort(6384, "The metrics export port, on every Ray host."),
    dashboardAgentPort: rayPort(52365, "The dashboard agent's HTTP port, on every Ray host."),
    autoscalerMetricsPort: rayPort(44217, "The autoscaler's metrics, on the head only (Ray's fixed default, on every interface)."),
    dashboardMetricsPort: rayPort(44227, "The dashboard's metrics, on the head only (Ray's fixed default, on every interface)."),
    minWorkerPort: port(10002).meta({
        description: "The lowest port Ray's worker processes listen on, on every Ray host.",
        across: "no other port of the host in minWorkerPort..maxWorkerPort",
    }),
    maxWorkerPort: port(19999).meta({
        description: "The highest port Ray's worker processes listen on, on every Ray host.",
        across: "at least ray.minWorkerPort",
    }),
    objectStoreMemoryBytes: int({ min: 78643200 })
        .optional()
        .describe("The object store's size in bytes (Ray's own floor is 75 MiB); unset lets Ray size it from the host's memory."),
    readyTimeoutSeconds: seconds().default(300).describe("How long to wait for every node to join the Ray cluster with its GPUs."),
    shmSize: optional(pattern(SHM_RE, "size (e.g. 64g)")).describe(
        "The Ray containers' /dev/shm size, docker syntax; unset: serve.shmSize, as before this key existed.",
    ),
    maxRestarts: int({ min: 0, max: 100 })
        .optional()
        .describe(
            "Restarts of a Ray container that fails, then it stays stopped (counted on the host's disk, as serve.maxRestarts); " +
                "unset: serve.maxRestarts, as before this key existed.",
        ),
    auth: withDefault(oneOf(["token", "disabled"]), "token").describe(
        "token: Ray's token authentication (Ray >= 2.52) with a generated secret token on every host, so nothing without it " +
            "can submit work to the cluster (the policy ray-token-auth requires it); disabled: Ray's own default, no authentication.",
    ),
};

export const raySchema = optionalSection(section(rayFields));

export type RayConfig = z.output<typeof raySchema>;

export const nativeFields = {
    masterPort: port(29500).meta({
        description: "The TCP port rank 0 listens on for the other ranks (vLLM's --master-port), on the head only.",
        across: "distinct from every other port opened on the head",
    }),
};

/** Read and validated for every backend; only the native backend uses it. */
export const nativeSchema = optionalSection(section(nativeFields));

export type NativeConfig = z.output<typeof nativeSchema>;

export const distributionFields = {
    network: withDefault(oneOf(["fabric", "management"]), "fabric").describe(
        "fabric: a host dials the next host of a chain at its fabricIp (same ssh port), the fast link on the target; its " +
            "host key is still checked against the operator's known_hosts entry for the node's sshHost. management: at its " +
            "sshHost, as the operator does.",
    ),
    modelStreams: int({ min: 1, max: 16 })
        .default(2)
        .describe(
            "How many ssh streams each link of the model chain carries at once, the files spread over them (the largest first, " +
                "each to the stream with the fewest bytes): one stream's cipher tops out far below the fabric.",
        ),
    imageLayers: withDefault(oneOf(["missing", "all"]), "missing").describe(
        "missing: the image chain sends only the layers some receiving host lacks (by its layer chain); `docker load` " +
            "verifies every layer it loads and each host ends with the source's image ID. all: the whole `docker save`.",
    ),
};

export const distributionSchema = optionalSection(section(distributionFields));

/** Paths without spaces or quotes: they go into the docker provider's ssh options, where one would split an option. */
export const sshSchema = section({
    privateKeyPath: required(quotablePath()).describe(
        "The private key the program logs in with (and, for a chain's hops, forwards in an agent of its own); no passphrase.",
    ),
    knownHostsFile: required(quotablePath()).describe(
        "The only known_hosts file the program trusts: every host key is checked against it (no global file, no ssh_config).",
    ),
});

export type SshConfig = z.output<typeof sshSchema>;

/** The smallest memory ceiling accepted: below it no Python process of vLLM or Ray even starts. */
export const MIN_CEILING_BYTES = 64 * 1024 ** 2;

/**
 * What keeps a host's memory from running out because of this program's containers (GB10: the CPU and the GPU
 * share it, and a host whose memory runs out freezes without an OOM kill). Every container of the program gets a
 * ceiling (its memory cgroup limit) and runs under a guard that stops it, for good, when the host's MemAvailable
 * falls below a floor: the floor holds even where GPU allocations are not charged to the container's cgroup.
 */
export const memoryGuardFields = {
    limit: optional(size(MIN_CEILING_BYTES)).describe(
        "The memory ceiling of every container of the program (0: none). Unset: on unifiedMemory nodes the host's memory " +
            "less reserve, elsewhere none. serve.memoryLimit sets the serve containers' own.",
    ),
    reserve: withDefault(size(0), 8 * 1024 ** 3).describe(
        "What the default ceiling of unifiedMemory nodes leaves to the operating system and everything else.",
    ),
    minAvailable: optional(size(0)).describe(
        "The floor of the host's MemAvailable below which the guard stops the containers for good (0: no floor). Unset: 4g on " +
            "unifiedMemory nodes, none elsewhere.",
    ),
    checkSeconds: int({ min: 1, max: 60 }).default(1).describe("How often, in seconds, the guard reads the host's MemAvailable."),
};

export const memoryGuardSchema = optionalSection(section(memoryGuardFields));

export type MemoryGuardConfig = z.output<typeof memoryGuardSchema>;

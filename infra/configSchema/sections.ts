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
import { evenIfInvalid, problem, validFields } from "./rules";

const IMAGE_REF_RE = /^[A-Za-z0-9][A-Za-z0-9._\-/:@]*$/;
const BUILD_ARG_RE = /^[A-Za-z_][A-Za-z0-9_]*$/;

/**
 * `image.build`: the image is built on `image.sourceNode` by that host's own Docker engine (the Docker provider's
 * Image over the node's ssh:// connection) and tagged `image.ref`; the chain then copies it to the other hosts.
 */
export const imageBuildFields = {
    /** The build context on the machine running Pulumi: relative to the project directory, or absolute. */
    context: required(quotablePath()),
    /** The Dockerfile, relative to the context. */
    dockerfile: withDefault(quotablePath(), "Dockerfile"),
    /** Build arguments (`--build-arg`): recorded in the state and the image's history in clear, so never secrets. */
    args: z
        .record(
            z.string().regex(BUILD_ARG_RE, { error: "is not a valid build argument name" }),
            z.preprocess(scalarText, z.string({ error: "must be a string" })),
            { error: (iss) => (iss.code === "invalid_key" ? iss.issues[0]?.message : "must be a map of build argument names to values") },
        )
        .default(() => ({})),
};

export const imageFields = {
    ref: required(pattern(IMAGE_REF_RE, "image reference")),
    /** host: already on `sourceNode` and streamed to the others; local: on the operator's engine; registry: pulled. */
    source: withDefault(oneOf(["host", "local", "registry"]), "host"),
    /** Node that already holds the image (source=host only); the head when unset. Checked against the nodes. */
    sourceNode: optional(string()),
    /**
     * chain: hosts load and forward the stream at once (source -> first -> second ...), so N hosts cost about one
     * copy and no image byte crosses the operator; hosts must reach each other's ssh and allow agent forwarding.
     * relay: one stream per host through the operator (source=host) or from it (source=local). Unused with registry.
     */
    distribution: withDefault(oneOf(["chain", "relay"]), "chain"),
    /** Build the image on the source node from a Dockerfile instead of finding it there (source=host only). */
    build: optional(section(imageBuildFields)),
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
    /** The model directory, at the same path on every host; mounted read-only. */
    hostPath: required(hostDir()),
    /** Where vLLM sees it; /models/<basename of hostPath> when unset. */
    containerPath: optional(absPath()),
    /** The name clients ask for (the API's `model`). */
    servedName: required(token("served model name")),
    /**
     * Node that holds the model directory; it is copied to the other nodes (along a chain, like the image) and the
     * containers restart when its content changes. Unset: the model is already in place on every host. Checked
     * against the nodes.
     */
    source: optional(string()),
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
    repo: required(pattern(HUB_REPO_RE, "Hub repository (owner/name)")),
    /** Pin a commit hash: a branch or tag moves under a deployed stack. */
    revision: required(pattern(HUB_REVISION_RE, "revision (a commit hash, or a branch or tag name)")),
    /** The Hub's address; unset: the client's own default (HF_ENDPOINT in the operator's environment, else the Hub). */
    endpoint: optional(
        pattern(/^https?:\/\/[A-Za-z0-9.-]+(:\d{1,5})?(\/[A-Za-z0-9._~\/-]*)?$/, "Hub endpoint URL (http(s)://host[:port][/path])"),
    ),
};

export const modelSchema = section({ ...modelFields, hub: optional(section(hubFields)) }).transform((m) => ({
    hostPath: m.hostPath,
    containerPath: m.containerPath ?? `/models/${path.posix.basename(m.hostPath)}`,
    servedName: m.servedName,
    source: m.source,
    hub: m.hub,
}));

export type ModelConfig = z.output<typeof modelSchema>;

/** Read and validated for every backend; only the ray backend uses it (its ports open on the head only). */
export const rayFields = {
    gcsPort: port(6379),
    dashboardPort: port(8265),
    clientPort: port(10001),
    /**
     * The ports Ray opens on every Ray host besides these, pinned (Ray picks most at random otherwise), so the port
     * contract, preflight and the policy pack know every one: raylet, object manager, runtime-env agent, dashboard
     * agent (gRPC and HTTP), metrics export, and the range its worker processes listen in.
     */
    nodeManagerPort: port(6380),
    objectManagerPort: port(6381),
    runtimeEnvAgentPort: port(6382),
    dashboardAgentGrpcPort: port(6383),
    metricsExportPort: port(6384),
    dashboardAgentPort: port(52365),
    /** On the head only: the autoscaler's and the dashboard's metrics (Ray's fixed defaults, on every interface). */
    autoscalerMetricsPort: port(44217),
    dashboardMetricsPort: port(44227),
    minWorkerPort: port(10002),
    maxWorkerPort: port(19999),
    /** Ray's own floor is 75 MiB; unset lets Ray size the object store from the host's memory. */
    objectStoreMemoryBytes: int({ min: 78643200 }).optional(),
    /** How long to wait for every node to join the Ray cluster with its GPUs. */
    readyTimeoutSeconds: seconds().default(300),
    /**
     * token (default): Ray's token authentication (Ray >= 2.52) with a generated secret token on every host, so
     * nothing without it can submit work to the cluster; disabled: Ray's own default (no authentication).
     */
    auth: withDefault(oneOf(["token", "disabled"]), "token"),
};

export const raySchema = optionalSection(section(rayFields));

export type RayConfig = z.output<typeof raySchema>;

/** vLLM's own multi-node (backend: native): rank 0 hosts the rendezvous on the head's fabric IP. */
export const nativeFields = {
    /** TCP port rank 0 listens on for the other ranks (vLLM --master-port); on the head host only. */
    masterPort: port(29500),
};

/** Read and validated for every backend; only the native backend uses it. */
export const nativeSchema = optionalSection(section(nativeFields));

export type NativeConfig = z.output<typeof nativeSchema>;

/**
 * How hosts copy to each other (the image and model chains). The operator's own connections (every ssh, the docker
 * provider) always use the management address (`nodes[].sshHost`).
 */
export const distributionFields = {
    /**
     * fabric (default): a host dials the next host of a chain at its fabric IP (`nodes[].fabricIp`, same ssh port),
     * the fast link on the target hardware; its host key is still checked against the operator's known_hosts entry
     * for the node's sshHost. management: at its sshHost, as the operator does.
     */
    network: withDefault(oneOf(["fabric", "management"]), "fabric"),
    /**
     * How many ssh streams each link of the model chain carries at once, the model's files spread over them (the
     * largest first, each to the stream with the fewest bytes): one stream's cipher tops out far below the fabric.
     */
    modelStreams: int({ min: 1, max: 16 }).default(2),
    /**
     * What the image chain sends. missing (default): only the layers that some receiving host lacks (by its layer
     * chain), the rest of `docker save`'s archive held back on the source; `docker load` verifies every layer it
     * loads, and each host ends with the source's image ID. all: the whole `docker save`, as a plain save/load.
     */
    imageLayers: withDefault(oneOf(["missing", "all"]), "missing"),
};

export const distributionSchema = optionalSection(section(distributionFields));

/**
 * Files on the machine running Pulumi, handed to ssh (which expands `~`, so they may be relative to home) and to
 * the docker provider's ssh options, where a space or quote would split or break the option.
 */
export const sshSchema = section({
    privateKeyPath: required(quotablePath()),
    knownHostsFile: required(quotablePath()),
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
    /**
     * The ceiling of every container of the program (docker syntax, e.g. 100g; "0": none). Unset: on unifiedMemory
     * nodes the host's memory less `reserve`, elsewhere none. serve.memoryLimit sets the serve containers' own.
     */
    limit: optional(size(MIN_CEILING_BYTES)),
    /** What the default ceiling of unifiedMemory nodes leaves to the operating system and everything else. */
    reserve: withDefault(size(0), 8 * 1024 ** 3),
    /** The floor of the host's MemAvailable (e.g. 4g; "0": no floor). Unset: 4g on unifiedMemory nodes, none elsewhere. */
    minAvailable: optional(size(0)),
    /** How often the guard reads the host's MemAvailable. */
    checkSeconds: int({ min: 1, max: 60 }).default(1),
};

export const memoryGuardSchema = optionalSection(section(memoryGuardFields));

export type MemoryGuardConfig = z.output<typeof memoryGuardSchema>;

/** The whole `vllm-cluster` namespace: its sections, the rules across sections, and the derived cluster shape. */
import { z } from "zod";
import { PortClaim, nodePorts, portSettingsOf } from "../contract";
import { hostDir, isObject, oneOf, optional, quote, requiredSection, section, withDefault } from "./fields";
import { NodeConfig, headIndex, nodeFields, nodesSchema, writtenRole } from "./nodes";
import { evenIfInvalid, problem, valid, validFields } from "./rules";
import { monitoringFields, monitoringSchema } from "./monitoring";
import { serveFields, serveSchema } from "./serve";
import {
    ImageConfig,
    distributionSchema,
    imageFields,
    imageSchema,
    memoryGuardSchema,
    modelFields,
    modelSchema,
    nativeFields,
    nativeSchema,
    rayFields,
    raySchema,
    sshSchema,
} from "./sections";

export const clusterFields = {
    nodes: nodesSchema.meta({
        description: "The GPU hosts, reached over SSH on the management network and talking to each other on the fabric.",
        across: "at least one node",
    }),
    image: requiredSection(imageSchema).describe("The image every container runs, where it comes from and how it reaches the hosts."),
    model: requiredSection(modelSchema).describe("The model directory on the hosts, and where it comes from."),
    serve: requiredSection(serveSchema).describe("The `vllm serve` settings and how the serve container runs."),
    ray: raySchema.describe("The Ray cluster (backend ray): its ports, its readiness wait, its authentication."),
    native: nativeSchema.describe("vLLM's own multi-node (backend native): rank 0 hosts the rendezvous on the head's fabric IP."),
    ssh: requiredSection(sshSchema).describe(
        "Files on the machine running Pulumi, for ssh (which expands `~`) and the Docker provider's ssh options.",
    ),
    distribution: distributionSchema.describe(
        "How hosts copy to each other (the image and model chains); the operator's own connections always use nodes[].sshHost.",
    ),
    memoryGuard: memoryGuardSchema.describe(
        "Keeps the program's containers from exhausting a host's memory: a ceiling per container, and a floor of the host's " +
            "MemAvailable below which the guard stops them.",
    ),
    monitoring: optional(monitoringSchema).describe(
        "Prometheus on the head and a node exporter on every host, scraping vLLM, Ray and the hosts over the fabric; " +
            "Grafana dashboards ship in infra/dashboards (docs/monitoring.md). Unset: none runs.",
    ),
    stateDir: withDefault(hostDir(), "/var/lib/vllm-cluster").meta({
        description:
            "Per-host state, on disk (preflight refuses a tmpfs): the key and token files, the containers' /tmp, the compile " +
            "caches and each container's crash budget, under <stateDir>/<node>/; the SSH user must be able to write it.",
        across: "apart from model.hostPath: neither inside the other",
    }),
    backend: withDefault(oneOf(["ray", "native"]), "ray").describe(
        "ray: vLLM on a Ray cluster (head and workers, serve on the head); native: vLLM's own multi-node rendezvous, no Ray.",
    ),
};

/** What the rules across sections may rely on: every field that passed on its own, the rest undefined. */
function partsOf(config: unknown) {
    const top = isObject(config) ? config : {};
    const nodes = Array.isArray(top.nodes) ? top.nodes : [];
    return {
        nodes: nodes.map((n) => (isObject(n) ? validFields(nodeFields, n) : undefined)),
        head: headIndex(nodes.map(writtenRole)),
        image: validFields(imageFields, top.image),
        model: validFields(modelFields, top.model),
        serve: validFields(serveFields, top.serve),
        ray: validFields(rayFields, top.ray),
        native: validFields(nativeFields, top.native),
        monitoring: isObject(top.monitoring) ? validFields(monitoringFields, top.monitoring) : undefined,
        backend: valid(clusterFields.backend, top.backend),
    };
}

type Parts = ReturnType<typeof partsOf>;

/** Judged only against a complete list of names, so a malformed name is not reported a second time here. */
function isANode(p: Parts, ctx: z.RefinementCtx, path: [string, string], name: string | undefined): void {
    const names = p.nodes.map((n) => n?.name);
    if (name === undefined || names.length === 0 || names.includes(undefined)) {
        return;
    }
    if (!names.includes(name)) {
        problem(ctx, path, `${quote(name)} is not one of the nodes (${names.join(", ")})`);
    }
}

function sourceNodesAreNodes(p: Parts, ctx: z.RefinementCtx): void {
    if (p.image.source === "host") {
        isANode(p, ctx, ["image", "sourceNode"], p.image.sourceNode);
    }
    isANode(p, ctx, ["model", "source"], p.model.source);
}

/** vLLM places one worker per GPU: TP x PP must use every GPU of every node, no more and no fewer. */
function parallelismUsesEveryGpu(p: Parts, ctx: z.RefinementCtx): void {
    const { tensorParallelSize: tp, pipelineParallelSize: pp } = p.serve;
    const gpus = p.nodes.flatMap((n) => (n?.gpus === undefined ? [] : [n.gpus]));
    if (tp === undefined || pp === undefined || gpus.length === 0 || gpus.length < p.nodes.length) {
        return;
    }
    const total = gpus.reduce((sum, g) => sum + g, 0);
    if (tp * pp !== total) {
        problem(
            ctx,
            ["serve", "tensorParallelSize"],
            `tensorParallelSize x pipelineParallelSize = ${tp} x ${pp} = ${tp * pp} but the nodes offer ${total} GPUs (TP x PP must equal total GPUs)`,
        );
    }
}

/** sshd first, then the public API, then the backend's own ports: a clash is blamed on the later, movable one. */
function inBlameOrder(claims: PortClaim[]): PortClaim[] {
    return [...claims.filter((c) => c.key === "serve.port"), ...claims.filter((c) => c.key !== "serve.port")];
}

/**
 * Every container uses host networking, so on each host sshd and the containers the backend runs there (the
 * contract's port claims) need distinct ports. The other backend's ports are never opened, so never checked.
 */
function portsDoNotClash(p: Parts, ctx: z.RefinementCtx): void {
    const backend = p.backend;
    if (backend === undefined) {
        return;
    }
    const settings = portSettingsOf(p);
    p.nodes.forEach((n, i) => {
        if (n === undefined) {
            return;
        }
        const claims = [
            { key: `nodes[${i}].sshPort`, path: ["nodes", i, "sshPort"], port: n.sshPort },
            ...inBlameOrder(nodePorts(backend, i === p.head, settings, p.monitoring !== undefined)).map((c) => ({
                ...c,
                path: c.key.split("."),
            })),
        ];
        const seen = new Map<number, string>();
        for (const { key, path, port } of claims) {
            const other = port === undefined ? undefined : seen.get(port);
            if (other !== undefined) {
                problem(ctx, path, `port ${port} clashes with ${other} on host ${n.name ?? `nodes[${i}]`}`);
            } else if (port !== undefined) {
                seen.set(port, key);
            }
        }
    });
}

/**
 * The model directory and the state directory are apart: the state (key and token files, every container's /tmp)
 * must never be mounted into the containers as part of the model, nor the model written as part of the state.
 */
function modelApartFromState(config: unknown, ctx: z.RefinementCtx): void {
    const top = isObject(config) ? config : {};
    const model = validFields(modelFields, top.model).hostPath;
    const state = valid(clusterFields.stateDir, top.stateDir);
    if (model === undefined || state === undefined) return;
    const inside = (a: string, b: string) => a === b || a.startsWith(`${b.replace(/\/+$/, "")}/`);
    if (inside(model, state) || inside(state, model)) {
        problem(ctx, ["model", "hostPath"], `${model} overlaps stateDir ${state}; keep the model and the node state apart`);
    }
}

/**
 * Ray's worker processes listen anywhere in ray.minWorkerPort..maxWorkerPort on every Ray host: a listener the
 * program configures there (the serve API, a Ray port, SSH) would lose to a Ray worker at random, some start after a
 * restart.
 */
function portsClearOfRayWorkers(p: Parts, ctx: z.RefinementCtx): void {
    const { minWorkerPort: lo, maxWorkerPort: hi } = p.ray;
    if ((p.backend ?? "ray") !== "ray" || lo === undefined || hi === undefined) return;
    if (lo > hi) {
        problem(ctx, ["ray", "maxWorkerPort"], `${hi} is below ray.minWorkerPort ${lo}`);
        return;
    }
    const settings = portSettingsOf(p);
    const seen = new Set<string>();
    p.nodes.forEach((n, i) => {
        const claims = [
            ...(n?.sshPort === undefined ? [] : [{ key: `nodes[${i}].sshPort`, port: n.sshPort }]),
            ...nodePorts("ray", i === p.head, settings, p.monitoring !== undefined),
        ];
        for (const { key, port } of claims) {
            if (port >= lo && port <= hi && !seen.has(key)) {
                seen.add(key);
                problem(
                    ctx,
                    key
                        .replace(/\[(\d+)\]/g, ".$1")
                        .split(".")
                        .map((k) => (/^\d+$/.test(k) ? Number(k) : k)),
                    `${port} is in Ray's worker port range ${lo}-${hi} (ray.minWorkerPort..maxWorkerPort) on every Ray host; choose a port outside it`,
                );
            }
        }
    });
}

const sectionsSchema = section(clusterFields);

function withSourceNode(image: ImageConfig, head: NodeConfig): ImageConfig {
    return { ...image, sourceNode: image.source === "host" ? (image.sourceNode ?? head.name) : undefined };
}

function assemble(c: z.output<typeof sectionsSchema>) {
    // the nodes rules guarantee exactly one head once validation has passed
    const head = c.nodes.find((n) => n.role === "head")!;
    const image = withSourceNode(c.image, head);
    return {
        nodes: c.nodes,
        /** The node with role head (validated: exactly one). */
        head,
        workers: c.nodes.filter((n) => n !== head),
        totalGpus: c.nodes.reduce((sum, n) => sum + n.gpus, 0),
        image,
        // model.hub downloads on one node: model.source, else the image's source node (the head without one)
        model: c.model.hub ? { ...c.model, source: c.model.source ?? image.sourceNode ?? head.name } : c.model,
        serve: c.serve,
        /** Read and validated for every backend; only the ray backend uses it. */
        ray: c.ray,
        /** Read and validated for every backend; only the native backend uses it. */
        native: c.native,
        ssh: c.ssh,
        distribution: c.distribution,
        memoryGuard: c.memoryGuard,
        /** Unset: no monitoring container runs. */
        monitoring: c.monitoring,
        stateDir: c.stateDir,
        backend: c.backend,
    };
}

/** A config that is not an object at all reads as empty, so each missing key is named. */
export const clusterSchema = z
    .preprocess((raw) => (isObject(raw) ? raw : {}), sectionsSchema)
    .superRefine((config: unknown, ctx) => {
        const parts = partsOf(config);
        sourceNodesAreNodes(parts, ctx);
        parallelismUsesEveryGpu(parts, ctx);
        portsDoNotClash(parts, ctx);
        modelApartFromState(config, ctx);
        portsClearOfRayWorkers(parts, ctx);
    }, evenIfInvalid)
    .transform(assemble);

export type ClusterConfig = z.output<typeof clusterSchema>;
export type Backend = ClusterConfig["backend"];

import * as docker from "@pulumi/docker";
import * as pulumi from "@pulumi/pulumi";
import * as random from "@pulumi/random";
import type { ModelConfig, ServeConfig } from "../infra/config";
import { ContainerInput, containerOptions } from "../infra/builders/containers";
import { SecretFile, apiKeyFile, apiKeyHash, secretFileCommands, secretHash, tlsCertFile, tlsKeyFile } from "../infra/builders/key";
import { LaunchTimings, launchTimings, serveReadinessCommand, serveReadinessSpec, watchdogEvent } from "../infra/builders/readiness";
import type { ClusterReadySpec } from "../infra/builders/ray";
import { serveArgsCheckCommand } from "../infra/builders/serveArgsCheck";
import { nativeRankContainerArgs, serveContainerArgs } from "../infra/builders/serveContainers";
import { HostCheck } from "../infra/providers/hostCheck";
import { KeyFile } from "../infra/providers/keyFile";
import { clusterPrefix, containerNames } from "../infra/contract";
import { ServeArgsCheck } from "../infra/providers/serveArgsCheck";
import type { TlsMaterial } from "../infra/tls";
import { SparkNode } from "./sparkNode";

/** Length of the generated API key (letters and digits). */
const API_KEY_LENGTH = 48;

/** Seconds the refresh-time look at a running server may take (one /health, one completion with and without the key). */
const READINESS_LOOK_SECONDS = 20;

/** One host of the server: the SparkNode and what its container takes from the config (with its image ID there). */
export interface ServeRank {
    host: SparkNode;
    input: ContainerInput;
}

/** Backend ray: one container on the head, beside the Ray head, started once the gate has passed. */
export interface RayServe {
    kind: "ray";
    /** The Ray head's address and the hash of its token file on the head (the serve container carries both). */
    rayHead: { address: pulumi.Output<string>; tokenHash?: pulumi.Output<string> };
    /** The gate's fingerprint: a replaced Ray container or a changed roster replaces serve. */
    fingerprint: pulumi.Output<string>;
    /** Every node of the Ray cluster: serve starts (after a reboot too) only once Ray sees each on its fabric IP. */
    nodes: ClusterReadySpec["nodes"];
}

/** Backend native: vLLM's own multi-node, one rank per host; rank 0 (the head) serves the API, the others are headless. */
export interface NativeServe {
    kind: "native";
    /** The head's fabric IP and the port of vLLM's rendezvous on it. */
    masterAddr: string;
    masterPort: number;
}

/** Hashes of the files installed on the head for the API server (not secret: one-way, of random or public data). */
export interface ServeFileHashes {
    apiKeyHash: pulumi.Output<string>;
    /** With TLS: of the certificate and the TLS key together. */
    tlsHash?: pulumi.Output<string>;
}

export interface ServeEndpointArgs {
    /** The cluster's name: it names the serve container the readiness check looks at, and the key's resource. */
    cluster: string;
    /** The host that serves the API and holds the key file. */
    head: SparkNode;
    /** HTTPS: the certificate and key (secret) installed on the head next to the API key; unset: plain HTTP. */
    tls?: TlsMaterial;
    stateDir: string;
    serve: Pick<ServeConfig, "port" | "readyTimeoutSeconds">;
    model: Pick<ModelConfig, "servedName">;
    /** The hosts the server runs on, the head first: backend ray runs on the head alone, native on each host. */
    ranks: ServeRank[];
    /** How the ranks find each other: through the Ray cluster, or vLLM's own rendezvous. */
    backend: RayServe | NativeServe;
    /** The GPUs of the whole cluster (a label of each container, and what the Ray probe expects). */
    clusterGpus: number;
    /** The command carries values from secret config (serve.extraArgs set with --secret): a refused value is never shown. */
    secretArgs?: boolean;
    /** Started only after these (the Roster: hosts that left the stack are cleared first). */
    after?: pulumi.Resource[];
}

/**
 * vLLM's OpenAI-compatible endpoint, for either backend: the API key file (and with TLS the certificate and its key)
 * on the head, the server's containers (started after those files exist, carrying their hashes), and the readiness gate: on create and whenever a
 * container was replaced it waits, bounded, for /health, one real chat completion with the key and a 401 without
 * it; `pulumi refresh` looks again, so the next `up --refresh` returns only once the server answers.
 */
export class ServeEndpoint extends pulumi.ComponentResource {
    /** The API key, generated here (a secret): installed as a file on the head; never on a command line, in env or in a label. */
    public readonly apiKey: pulumi.Output<string>;
    public readonly apiKeyFile: KeyFile;
    /** With TLS: the certificate and the TLS key on the head. */
    public readonly tlsFiles: KeyFile[];
    public readonly containers: docker.Container[];
    /** Each container's command, checked by the image's own vLLM on its host before the container is made or replaced. */
    public readonly argsChecks: ServeArgsCheck[];
    public readonly readiness: HostCheck;
    /** OpenAI-compatible base URL, resolved once readiness passed. */
    public readonly endpoint: pulumi.Output<string>;
    /** What the server's last start took: from its container's start to the first completion, as the last wait saw it. */
    public readonly launch: pulumi.Output<LaunchTimings>;
    /** The serve watchdog's last restart of the running server as the last readiness wait or refresh saw it; "none". */
    public readonly watchdog: pulumi.Output<string>;

    constructor(name: string, args: ServeEndpointArgs, opts?: pulumi.ComponentResourceOptions) {
        super("vllm-cluster:index:ServeEndpoint", name, {}, opts);
        if (args.ranks.length === 0) {
            throw new Error(`${name}: a server needs at least one host`);
        }
        if (args.backend.kind === "ray" && args.ranks.length !== 1) {
            throw new Error(`${name}: backend ray serves from the head alone, not from ${args.ranks.length} hosts`);
        }
        const { head, stateDir } = args;
        const node = head.node.name;

        // "api-key" was made at the top level before this component owned it: the alias keeps the key on upgrade
        const key = new random.RandomPassword(
            `${clusterPrefix(args.cluster)}api-key`,
            { length: API_KEY_LENGTH, special: false },
            { parent: this, aliases: [{ parent: pulumi.rootStackResource }] },
        );
        this.apiKey = pulumi.secret(key.result);
        // Not secret: a one-way hash of a 48-character random key, so diffs of the labels stay readable.
        const keyHash = pulumi.unsecret(key.result.apply(apiKeyHash));
        this.apiKeyFile = headFile(this, `${name}-api-key-file`, head, apiKeyFile(stateDir, node), key.result, keyHash);
        const tls = args.tls ? tlsFiles(this, name, head, stateDir, args.tls) : undefined;
        this.tlsFiles = tls?.files ?? [];
        const hashes: ServeFileHashes = { apiKeyHash: keyHash, tlsHash: tls?.hash };

        this.containers = [];
        this.argsChecks = [];
        for (const c of serveContainers(name, args, hashes)) {
            const containerArgs = c.args(this.containers.map((x) => x.id));
            // The command, checked by the image's own vLLM on the host that runs it: a change it refuses fails the
            // operation (and the preview) before the running container, replaced delete-first, is touched.
            const check = serveArgsCheck(this, c, containerArgs);
            this.argsChecks.push(check);
            this.containers.push(
                new docker.Container(
                    c.name,
                    containerArgs,
                    containerOptions(this, c.host, [this.apiKeyFile, ...this.tlsFiles, ...(args.after ?? []), check]),
                ),
            );
        }

        const serveContainer = containerNames(args.cluster).serve;
        const spec = (seconds: number) =>
            serveReadinessSpec(node, args.serve, args.model, stateDir, seconds, tls !== undefined, serveContainer);
        this.readiness = new HostCheck(
            `${name}-readiness`,
            {
                what: `serve readiness on node ${node}`,
                waitScript: serveReadinessCommand(head.ssh, spec(args.serve.readyTimeoutSeconds)),
                checkScript: serveReadinessCommand(head.ssh, { ...spec(READINESS_LOOK_SECONDS), look: true }),
                triggers: this.containers.map((c) => c.id),
            },
            { parent: this },
        );

        const url = `${tls ? "https" : "http"}://${head.node.sshHost}:${args.serve.port}/v1`;
        this.endpoint = this.readiness.result.apply(() => url);
        this.launch = pulumi.all([this.readiness.waitResult, this.readiness.waitedSeconds]).apply(([r, s]) => launchTimings(r, s));

        this.watchdog = this.readiness.result.apply(watchdogEvent);

        this.registerOutputs({ endpoint: this.endpoint, launch: this.launch, watchdog: this.watchdog });
    }
}

/** One container of the server: its resource name, its host, and its arguments given the IDs of those before it. */
interface ServeContainer {
    name: string;
    host: SparkNode;
    args: (earlierIds: pulumi.Output<string>[]) => docker.ContainerArgs;
    secretArgs: boolean;
}

/**
 * The server's containers, the one that serves the API first: `<name>-container` next to the Ray head, or
 * `<name>-rank-<N>-container` on each host, rank 0 on the head. Each carries the hashes of the files it reads at
 * start (a new key or certificate replaces it); a headless rank carries rank 0's container ID, so it restarts with it.
 */
function serveContainers(name: string, args: ServeEndpointArgs, files: ServeFileHashes): ServeContainer[] {
    const { backend, clusterGpus } = args;
    const secretArgs = args.secretArgs ?? false;
    if (backend.kind === "ray") {
        const [{ host, input }] = args.ranks;
        const args0 = (): docker.ContainerArgs =>
            serveContainerArgs({
                ...input,
                rayTokenHash: backend.rayHead.tokenHash,
                ...files,
                rayAddress: backend.rayHead.address,
                clusterFingerprint: backend.fingerprint,
                clusterGpus,
                rayNodes: backend.nodes,
            });
        return [{ name: `${name}-container`, host, secretArgs, args: args0 }];
    }
    const nnodes = args.ranks.length;
    return args.ranks.map(({ host, input }, nodeRank) => ({
        name: `${name}-rank-${nodeRank}-container`,
        host,
        secretArgs,
        args: (earlier) =>
            nativeRankContainerArgs({
                ...input,
                rank: { nodeRank, nnodes, masterAddr: backend.masterAddr, masterPort: backend.masterPort },
                clusterGpus,
                ...(nodeRank === 0 ? files : {}),
                rank0ContainerId: nodeRank > 0 ? earlier[0] : undefined,
            }),
    }));
}

/** The check of one serve container's command (`<container name without -container>-args-check`). */
function serveArgsCheck(parent: pulumi.Resource, c: ServeContainer, containerArgs: docker.ContainerArgs): ServeArgsCheck {
    const node = c.host.node.name;
    const image = pulumi.output(containerArgs.image);
    return new ServeArgsCheck(
        `${c.name.replace(/-container$/, "")}-args-check`,
        {
            what: `serve arguments on node ${node}`,
            node,
            image,
            command: containerArgs.command!,
            checkScript: image.apply((id) => serveArgsCheckCommand(c.host.ssh, node, id)),
            secretArgs: c.secretArgs,
        },
        { parent, dependsOn: [c.host.preflight], additionalSecretOutputs: c.secretArgs ? ["command"] : [] },
    );
}

/** A file the API server reads at start, installed on the head from a secret (SecretFile says where). */
function headFile(
    parent: pulumi.Resource,
    name: string,
    head: SparkNode,
    file: SecretFile,
    content: pulumi.Input<string>,
    hash: pulumi.Input<string>,
): KeyFile {
    const what = `${file.kind} file on node ${file.node}`;
    return new KeyFile(
        name,
        { what, ...secretFileCommands(head.ssh, file), key: content, keyHash: hash },
        { parent, dependsOn: [head.preflight] },
    );
}

/** The certificate and the TLS key on the head, and their joint hash (not secret: one-way) for the server's label. */
function tlsFiles(
    parent: pulumi.Resource,
    name: string,
    head: SparkNode,
    stateDir: string,
    tls: TlsMaterial,
): { files: KeyFile[]; hash: pulumi.Output<string> } {
    const node = head.node.name;
    const certHash = pulumi.output(secretHash("tls certificate", tls.cert));
    const keyHash = pulumi.unsecret(tls.key.apply((k) => secretHash("tls key", k)));
    const files = [
        headFile(parent, `${name}-tls-cert-file`, head, tlsCertFile(stateDir, node), tls.cert, certHash),
        headFile(parent, `${name}-tls-key-file`, head, tlsKeyFile(stateDir, node), tls.key, keyHash),
    ];
    return { files, hash: pulumi.all([certHash, keyHash]).apply(([c, k]) => `${c}${k}`) };
}

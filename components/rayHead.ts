import * as docker from "@pulumi/docker";
import * as pulumi from "@pulumi/pulumi";
import * as random from "@pulumi/random";
import type { RayConfig } from "../infra/config";
import { containerOptions } from "../infra/builders/containers";
import { rayTokenFile, secretFileCommands, secretHash } from "../infra/builders/key";
import { RayHeadContainerInput, rayHeadContainerArgs } from "../infra/builders/rayContainers";
import { clusterPrefix, containerNames } from "../infra/contract";
import { KeyFile } from "../infra/providers/keyFile";
import { ClusterReady, ClusterReadyArgs } from "./clusterReady";
import { SparkNode } from "./sparkNode";

/** Length of the generated Ray token (letters and digits). */
const RAY_TOKEN_LENGTH = 48;

export interface RayHeadArgs extends Omit<RayHeadContainerInput, "node" | "rayTokenHash"> {
    /** The head host (provider, node facts, state directory). */
    host: SparkNode;
    /** `ray.auth`: with `token`, the head generates the cluster's token, and every Ray container requires it. */
    auth: RayConfig["auth"];
}

/** The cluster's Ray token: the secret every host installs as a file, and its one-way hash (not secret). */
export interface RayToken {
    value: pulumi.Output<string>;
    hash: pulumi.Output<string>;
}

/** What the gate needs beyond the head and its workers (ClusterReadyArgs without what the head supplies). */
export type RayClusterReadyArgs = Omit<ClusterReadyArgs, "head" | "headContainer" | "address" | "containerIds">;

/**
 * The Ray head: the cluster's token (with `ray.auth: token`) and its file on the head, the head container bound to
 * the head's fabric IP (the dashboard stays on loopback), and the cluster's readiness (`ready`), the gate that
 * waits until Ray sees every host on its fabric IP. Workers (RayWorker) take the address, container ID and token
 * from it.
 */
export class RayHead extends pulumi.ComponentResource {
    public readonly host: SparkNode;
    /** The cluster's name: it names the head's containers and the children of the cluster's own. */
    public readonly cluster: string;
    public readonly container: docker.Container;
    /** `<fabric IP>:<gcs port>`, resolved once the container exists: workers take it as input. */
    public readonly address: pulumi.Output<string>;
    /** With token authentication: the token every worker installs; undefined with `ray.auth: disabled`. */
    public readonly token?: RayToken;
    /** The hash of the token as installed on the head: the head's containers (serve too) carry it as a label. */
    public readonly tokenHash?: pulumi.Output<string>;

    constructor(name: string, args: RayHeadArgs, opts?: pulumi.ComponentResourceOptions) {
        super("vllm-cluster:index:RayHead", name, {}, opts);
        const { host, auth, ...input } = args;
        this.host = host;
        this.cluster = args.cluster;
        const node = host.node;

        if (auth === "token") {
            // "ray-token" and its files were created at the top level and under each host before this component
            // owned them: the aliases keep them (and so every Ray container) in place on upgrade
            const password = new random.RandomPassword(
                `${clusterPrefix(args.cluster)}ray-token`,
                { length: RAY_TOKEN_LENGTH, special: false },
                { parent: this, aliases: [{ parent: pulumi.rootStackResource }] },
            );
            this.token = { value: password.result, hash: pulumi.unsecret(password.result.apply((t) => secretHash("ray token", t))) };
            this.tokenHash = rayTokenFileOn(this, host, this.token, args.cluster);
        }

        this.container = new docker.Container(
            `${name}-container`,
            rayHeadContainerArgs({ ...input, node, rayTokenHash: this.tokenHash }),
            containerOptions(this, host),
        );

        const address = `${node.fabricIp}:${args.ports.gcsPort}`;
        this.address = this.container.id.apply(() => address);

        this.registerOutputs({ address: this.address });
    }

    /**
     * The cluster's readiness: the gate, a child of the head, waits (bounded) until Ray sees the head and every
     * worker on its fabric IP with the expected GPUs; its fingerprint changes exactly when a Ray container was replaced or the roster changed.
     */
    public ready(workers: { container: docker.Container }[], args: RayClusterReadyArgs): ClusterReady {
        return new ClusterReady(
            `${clusterPrefix(this.cluster)}cluster-ready`,
            {
                ...args,
                head: this.host,
                headContainer: containerNames(this.cluster).rayHead,
                address: this.address,
                containerIds: [this.container.id, ...workers.map((w) => w.container.id)],
            },
            { parent: this, aliases: [{ parent: pulumi.rootStackResource }] },
        );
    }
}

/**
 * The token installed as a mode-600 file on `host` (after its preflight made the state directory), a child of
 * `parent`; returns the installed file's hash, which that host's Ray containers take as data.
 */
export function rayTokenFileOn(parent: pulumi.Resource, host: SparkNode, token: RayToken, cluster: string): pulumi.Output<string> {
    const node = host.node.name;
    const file = new KeyFile(
        `${clusterPrefix(cluster)}${node}-ray-token-file`,
        {
            what: `ray token file on node ${node}`,
            ...secretFileCommands(host.ssh, rayTokenFile(host.stateDir, node)),
            key: token.value,
            keyHash: token.hash,
        },
        { parent, dependsOn: [host.preflight], aliases: [{ parent: host }] },
    );
    return pulumi.unsecret(file.keyHash);
}

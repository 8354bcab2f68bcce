import * as command from "@pulumi/command";
import * as docker from "@pulumi/docker";
import * as pulumi from "@pulumi/pulumi";
import { apiKeyInstallCommand, apiKeyRemoveCommand, joinFingerprint } from "./commands";
import { NativeServeContainerParams, containerOptions, nativeServeContainerArgs } from "./containerArgs";
import { SparkNode } from "./sparkNode";
import { HostCheck } from "./hostCheck";
import { keyHash, serveEndpointUrl, serveReadiness } from "./vllmServe";

/** One rank as the plan gives it: every container input except the deploy-time ones. */
export type NativeRankParams = Omit<NativeServeContainerParams, "imageId" | "rank0ContainerId" | "apiKeyHash">;

export interface NativeServeArgs {
    /** Rank 0 first (the head), then ranks 1..n-1, each with its host and that host's image ID. */
    ranks: { params: NativeRankParams; host: SparkNode; imageId: pulumi.Input<string> }[];
    /** The API key (secret). Installed as a file on the head only; never in a command line, env or label. */
    apiKey: pulumi.Input<string>;
    readyTimeoutSeconds: number;
}

/**
 * vLLM's own multi-node (backend native): a `vllm-serve` container per host, no Ray. Rank 0 on the head serves
 * the API and hosts the rendezvous; ranks > 0 take rank 0's container ID as data, so a replaced rank 0 replaces
 * them too. The gate is rank 0's readiness check (/health, then one real chat completion with the key), re-run
 * whenever any rank's container changed.
 */
export class VllmNativeServe extends pulumi.ComponentResource {
    public readonly apiKeyFile: command.local.Command;
    public readonly containers: docker.Container[];
    public readonly readiness: HostCheck;
    public readonly endpoint: pulumi.Output<string>;
    /** Hash of every rank's container ID: changes exactly when a rank was replaced. */
    public readonly fingerprint: pulumi.Output<string>;

    constructor(name: string, args: NativeServeArgs, opts?: pulumi.ComponentResourceOptions) {
        super("vllm-cluster:index:VllmNativeServe", name, {}, opts);
        const [rank0, ...others] = args.ranks;
        if (!rank0 || rank0.params.rank.nodeRank !== 0) {
            throw new Error("native serve: the first rank must be rank 0 on the head");
        }
        const head = rank0.host;
        const { stateDir, serve } = rank0.params;

        this.apiKeyFile = new command.local.Command(
            `${name}-api-key-file`,
            {
                create: apiKeyInstallCommand(head.ssh, stateDir, head.node.name),
                delete: apiKeyRemoveCommand(head.ssh, stateDir, head.node.name),
                stdin: pulumi.secret(args.apiKey),
                logging: "stderr",
            },
            { parent: this, additionalSecretOutputs: ["stdin"] },
        );

        const first = new docker.Container(
            `${name}-rank-0-container`,
            nativeServeContainerArgs({ ...rank0.params, node: head.node, imageId: rank0.imageId, apiKeyHash: keyHash(args.apiKey) }),
            containerOptions(this, head.provider, [this.apiKeyFile]),
        );
        const rest = others.map(
            (r) =>
                new docker.Container(
                    `${name}-rank-${r.params.rank.nodeRank}-container`,
                    nativeServeContainerArgs({ ...r.params, node: r.host.node, imageId: r.imageId, rank0ContainerId: first.id }),
                    containerOptions(this, r.host.provider),
                ),
        );
        this.containers = [first, ...rest];
        const ids = this.containers.map((c) => c.id);

        this.readiness = serveReadiness(`${name}-readiness`, head, stateDir, serve, args.readyTimeoutSeconds, ids, this);

        const url = serveEndpointUrl(head.node.sshHost, serve.port);
        this.endpoint = this.readiness.result.apply(() => url);
        this.fingerprint = pulumi.all(ids).apply((xs) => joinFingerprint(xs));

        this.registerOutputs({ endpoint: this.endpoint, fingerprint: this.fingerprint });
    }
}

import * as docker from "@pulumi/docker";
import * as pulumi from "@pulumi/pulumi";
import type { ModelConfig, ServeConfig } from "../infra/config";
import { containerOptions } from "../infra/builders/containers";
import { apiKeyFile, apiKeyHash, secretFileCommands } from "../infra/builders/key";
import { serveReadinessCommand, serveReadinessSpec } from "../infra/builders/readiness";
import { HostCheck } from "../infra/providers/hostCheck";
import { KeyFile } from "../infra/providers/keyFile";
import { SparkNode } from "./sparkNode";

/** Seconds the refresh-time look at a running server may take (one /health, one completion with and without the key). */
const READINESS_LOOK_SECONDS = 20;

/** One container of the server: on which host, and its arguments. */
export interface ServeContainer {
    /** Logical name of the container resource. */
    name: string;
    host: SparkNode;
    /**
     * The container's arguments, given the API key's hash (data, so a new key replaces the server) and the IDs of
     * the containers listed before it (a headless rank takes rank 0's, so it restarts with it).
     */
    args: (keyHash: pulumi.Output<string>, earlierIds: pulumi.Output<string>[]) => docker.ContainerArgs;
}

export interface ServeEndpointArgs {
    /** The host that serves the API and holds the key file. */
    head: SparkNode;
    /** The API key (secret). Installed as a file on the head; never on a command line, in env or in a label. */
    apiKey: pulumi.Input<string>;
    stateDir: string;
    serve: Pick<ServeConfig, "port" | "readyTimeoutSeconds">;
    model: Pick<ModelConfig, "servedName">;
    /** The server's containers, the one that serves the API first. */
    containers: ServeContainer[];
    /** Started only after these (the Roster: hosts that left the stack are cleared first). */
    after?: pulumi.Resource[];
}

/**
 * vLLM's OpenAI-compatible endpoint, for either backend: the API key file on the head, the server's containers
 * (started after the key file exists, carrying the key's hash), and the readiness gate: on create and whenever a
 * container was replaced it waits, bounded, for /health, one real chat completion with the key and a 401 without
 * it; `pulumi refresh` looks again, so the next `up --refresh` returns only once the server answers.
 */
export class ServeEndpoint extends pulumi.ComponentResource {
    public readonly apiKeyFile: KeyFile;
    public readonly containers: docker.Container[];
    public readonly readiness: HostCheck;
    /** OpenAI-compatible base URL, resolved once readiness passed. */
    public readonly endpoint: pulumi.Output<string>;

    constructor(name: string, args: ServeEndpointArgs, opts?: pulumi.ComponentResourceOptions) {
        super("vllm-cluster:index:ServeEndpoint", name, {}, opts);
        if (args.containers.length === 0) {
            throw new Error(`${name}: a server needs at least one container`);
        }
        const { head, stateDir } = args;
        const node = head.node.name;

        // Not secret: a one-way hash of a 48-character random key, so diffs of the labels stay readable.
        const keyHash = pulumi.unsecret(pulumi.output(args.apiKey).apply(apiKeyHash));
        this.apiKeyFile = new KeyFile(
            `${name}-api-key-file`,
            {
                what: `api key file on node ${node}`,
                ...secretFileCommands(head.ssh, apiKeyFile(stateDir, node)),
                key: args.apiKey,
                keyHash,
            },
            { parent: this },
        );

        this.containers = [];
        for (const c of args.containers) {
            const earlier = this.containers.map((x) => x.id);
            this.containers.push(
                new docker.Container(
                    c.name,
                    c.args(keyHash, earlier),
                    containerOptions(this, c.host.provider, [this.apiKeyFile, ...(args.after ?? [])]),
                ),
            );
        }

        const spec = (seconds: number) => serveReadinessSpec(node, args.serve, args.model, stateDir, seconds);
        this.readiness = new HostCheck(
            `${name}-readiness`,
            {
                what: `serve readiness on node ${node}`,
                waitScript: serveReadinessCommand(head.ssh, spec(args.serve.readyTimeoutSeconds)),
                checkScript: serveReadinessCommand(head.ssh, spec(READINESS_LOOK_SECONDS)),
                triggers: this.containers.map((c) => c.id),
            },
            { parent: this },
        );

        const url = `http://${head.node.sshHost}:${args.serve.port}/v1`;
        this.endpoint = this.readiness.result.apply(() => url);

        this.registerOutputs({ endpoint: this.endpoint });
    }
}

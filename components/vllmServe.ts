import * as command from "@pulumi/command";
import * as docker from "@pulumi/docker";
import * as pulumi from "@pulumi/pulumi";
import { ServeSpec, apiKeyHash, apiKeyInstallCommand, apiKeyRemoveCommand, serveReadinessCommand, serveReadinessSpec } from "./commands";
import { ServeContainerParams, containerOptions, serveContainerArgs } from "./containerArgs";
import { HostCheck } from "./hostCheck";
import { SparkNode } from "./sparkNode";

export interface VllmServeArgs extends Omit<ServeContainerParams, "node" | "apiKeyHash"> {
    /** The head host: serve runs next to the Ray head, sharing its network, IPC and Ray session dir. */
    head: SparkNode;
    /** The API key (secret). Installed as a file on the head; never in a command line, env or label. */
    apiKey: pulumi.Input<string>;
    readyTimeoutSeconds: number;
}

/** The key's hash as plain data: not secret (see apiKeyHash), so the container's labels stay readable in diffs. */
export function keyHash(apiKey: pulumi.Input<string>): pulumi.Output<string> {
    return pulumi.unsecret(pulumi.output(apiKey).apply(apiKeyHash));
}

/** Seconds the refresh-time look at a running server may take (one /health, one completion with and without the key). */
const READINESS_LOOK_SECONDS = 20;

/**
 * The readiness gate of a server on `host`: on create and whenever `triggers` change (the container was replaced)
 * it waits, bounded, for /health, one real chat completion with the key and a 401 without it; `pulumi refresh`
 * looks again, so the next `up --refresh` returns only once the server answers.
 */
export function serveReadiness(
    name: string,
    host: SparkNode,
    stateDir: string,
    serve: Pick<ServeSpec, "port" | "servedName">,
    timeoutSeconds: number,
    triggers: pulumi.Input<string>[],
    parent: pulumi.Resource,
): HostCheck {
    const spec = (seconds: number) => serveReadinessSpec(host.node.name, serve, stateDir, seconds);
    return new HostCheck(
        name,
        {
            what: `serve readiness on node ${host.node.name}`,
            waitScript: serveReadinessCommand(host.ssh, spec(timeoutSeconds)),
            checkScript: serveReadinessCommand(host.ssh, { ...spec(READINESS_LOOK_SECONDS), intervalSeconds: 2 }),
            triggers,
        },
        { parent },
    );
}

/** The OpenAI-compatible base URL operators use: the head's SSH address and the serve port. */
export function serveEndpointUrl(sshHost: string, port: number): string {
    return `http://${sshHost}:${port}/v1`;
}

/**
 * vllm serve as a docker container on the head (so refresh sees it die, destroy stops it, restarts are bounded),
 * the API key file it reads, and a readiness check: /health then one real chat completion with the key.
 */
export class VllmServe extends pulumi.ComponentResource {
    public readonly apiKeyFile: command.local.Command;
    public readonly container: docker.Container;
    public readonly readiness: HostCheck;
    /** OpenAI-compatible base URL, resolved once readiness passed. */
    public readonly endpoint: pulumi.Output<string>;

    constructor(name: string, args: VllmServeArgs, opts?: pulumi.ComponentResourceOptions) {
        super("vllm-cluster:index:VllmServe", name, {}, opts);
        const { head, apiKey, readyTimeoutSeconds, ...params } = args;
        const node = head.node;
        const t = head.ssh;

        this.apiKeyFile = new command.local.Command(
            `${name}-api-key-file`,
            {
                create: apiKeyInstallCommand(t, args.stateDir, node.name),
                delete: apiKeyRemoveCommand(t, args.stateDir, node.name),
                stdin: pulumi.secret(apiKey),
                logging: "stderr",
            },
            { parent: this, additionalSecretOutputs: ["stdin"] },
        );

        this.container = new docker.Container(
            `${name}-container`,
            serveContainerArgs({ ...params, node, apiKeyHash: keyHash(apiKey) }),
            // The key file carries no data the container could take as input, hence dependsOn.
            containerOptions(this, head.provider, [this.apiKeyFile]),
        );

        this.readiness = serveReadiness(
            `${name}-readiness`,
            head,
            args.stateDir,
            args.serve,
            readyTimeoutSeconds,
            [this.container.id],
            this,
        );

        const url = serveEndpointUrl(node.sshHost, args.serve.port);
        this.endpoint = this.readiness.result.apply(() => url);

        this.registerOutputs({ endpoint: this.endpoint });
    }
}

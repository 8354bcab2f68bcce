import * as command from "@pulumi/command";
import * as docker from "@pulumi/docker";
import * as pulumi from "@pulumi/pulumi";
import {
    API_KEY_CONTAINER_PATH,
    RAY_SESSION_CONTAINER_DIR,
    SERVE_CONTAINER,
    SERVE_ENTRYPOINT,
    ServeSpec,
    apiKeyHostPath,
    apiKeyInstallScript,
    apiKeyRemoveScript,
    containerLabels,
    raySessionHostDir,
    remoteScriptCommand,
    serveCommand,
    serveEnv,
    serveReadinessCommand,
} from "./commands";
import { baseContainerArgs, modelVolume } from "./containerArgs";
import { SparkNode } from "./sparkNode";

export interface VllmServeArgs {
    /** The head host: serve runs next to the Ray head, sharing its network, IPC and Ray session dir. */
    head: SparkNode;
    /** Image ID on the head host. */
    imageId: pulumi.Input<string>;
    /** Configured image reference (label only). */
    imageRef: string;
    stack: string;
    serve: ServeSpec;
    modelHostPath: string;
    stateDir: string;
    /** Ray head address `<fabric IP>:<gcs port>`. */
    rayAddress: pulumi.Input<string>;
    /** ClusterReady's fingerprint: a re-formed Ray cluster restarts serve. */
    clusterFingerprint: pulumi.Input<string>;
    /** Total GPUs of all nodes (label). */
    clusterGpus: number;
    /** The API key (secret). Installed as a file on the head; never in a command line, env or label. */
    apiKey: pulumi.Input<string>;
    shmSize?: string;
    maxRestarts: number;
    readyTimeoutSeconds: number;
}

/**
 * vllm serve as a docker container on the head (so refresh sees it die, destroy stops it, restarts are bounded),
 * the API key file it reads, and a readiness check: /health then one real chat completion with the key.
 */
export class VllmServe extends pulumi.ComponentResource {
    public readonly apiKeyFile: command.local.Command;
    public readonly container: docker.Container;
    public readonly readiness: command.local.Command;
    /** OpenAI-compatible base URL, resolved once readiness passed. */
    public readonly endpoint: pulumi.Output<string>;

    constructor(name: string, args: VllmServeArgs, opts?: pulumi.ComponentResourceOptions) {
        super("vllm-cluster:index:VllmServe", name, {}, opts);
        const node = args.head.node;
        const t = args.head.ssh;
        const keyFile = apiKeyHostPath(args.stateDir, node.name);

        this.apiKeyFile = new command.local.Command(
            `${name}-api-key-file`,
            {
                create: remoteScriptCommand(t, `api key install on node ${node.name}`, apiKeyInstallScript(args.stateDir, node.name)),
                delete: remoteScriptCommand(t, `api key removal on node ${node.name}`, apiKeyRemoveScript(args.stateDir, node.name)),
                stdin: pulumi.secret(args.apiKey),
                logging: "stderr",
            },
            { parent: this, additionalSecretOutputs: ["stdin"] },
        );

        this.container = new docker.Container(
            `${name}-container`,
            baseContainerArgs({
                containerName: SERVE_CONTAINER,
                node,
                imageId: args.imageId,
                entrypoints: SERVE_ENTRYPOINT,
                command: serveCommand(args.serve),
                envs: pulumi.output(args.rayAddress).apply((addr) => serveEnv(node, addr)),
                labels: containerLabels(
                    {
                        stack: args.stack,
                        role: "serve",
                        node,
                        imageRef: args.imageRef,
                        ports: { serve: args.serve.port },
                    },
                    {
                        "tensor-parallel-size": String(args.serve.tensorParallelSize),
                        "pipeline-parallel-size": String(args.serve.pipelineParallelSize),
                        "cluster-gpus": String(args.clusterGpus),
                        "api-key-file": API_KEY_CONTAINER_PATH,
                    },
                ),
                dynamicLabels: [{ label: "vllm-cluster.cluster-fingerprint", value: args.clusterFingerprint }],
                volumes: [
                    modelVolume(args.modelHostPath, args.serve.modelContainerPath),
                    { hostPath: keyFile, containerPath: API_KEY_CONTAINER_PATH, readOnly: true },
                    { hostPath: raySessionHostDir(args.stateDir, node.name), containerPath: RAY_SESSION_CONTAINER_DIR },
                ],
                shmSize: args.shmSize,
                maxRestarts: args.maxRestarts,
            }),
            // The key file carries no data the container could take as input, hence dependsOn.
            { parent: this, provider: args.head.provider, deleteBeforeReplace: true, dependsOn: [this.apiKeyFile] },
        );

        this.readiness = new command.local.Command(
            `${name}-readiness`,
            {
                create: serveReadinessCommand(t, {
                    node: node.name,
                    port: args.serve.port,
                    servedName: args.serve.servedName,
                    apiKeyFile: keyFile,
                    timeoutSeconds: args.readyTimeoutSeconds,
                }),
                triggers: [this.container.id],
            },
            { parent: this },
        );

        const url = `http://${node.sshHost}:${args.serve.port}/v1`;
        this.endpoint = this.readiness.stdout.apply(() => url);

        this.registerOutputs({ endpoint: this.endpoint });
    }
}

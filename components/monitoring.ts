/**
 * Monitoring (`monitoring`): Prometheus on the head, a node exporter on every host, Grafana on the head with
 * `monitoring.grafana`, and their images on the hosts. It owns its containers; what they run is built by
 * infra/builders/monitoring.ts and grafana.ts from the config alone.
 */
import * as docker from "@pulumi/docker";
import * as pulumi from "@pulumi/pulumi";
import * as random from "@pulumi/random";
import type { ClusterConfig, MonitoringConfig } from "../infra/config";
import { containerNames } from "../infra/contract";
import { grafanaContainerArgs } from "../infra/builders/grafana";
import { MonitoringContainerInput, nodeExporterContainerArgs, prometheusContainerArgs, prometheusHint } from "../infra/builders/monitoring";
import { ImageDistribution } from "./imageDistribution";
import { SparkNode } from "./sparkNode";

export interface MonitoringArgs {
    cfg: ClusterConfig;
    stack: string;
    /** The cluster's name: it names the containers and the volumes on the head. */
    cluster: string;
    /** Every host, the head among them. */
    nodes: SparkNode[];
    /** What Prometheus starts after: the serve endpoint. */
    after: pulumi.Input<pulumi.Resource>[];
    /** With serve.tls: the API's certificate (PEM), which Prometheus trusts, and nothing else, for vLLM's /metrics. */
    serveCert?: string;
}

/**
 * The images are made present as the cluster's own image is (monitoring.source: registry pulls on each host; host
 * copies from the head along image.distribution), one distribution per distinct reference; then a node exporter on
 * each host (after its preflight), Prometheus on the head (after `after`) with its TSDB in a volume, and Grafana.
 */
export class Monitoring extends pulumi.ComponentResource {
    /** How to reach Prometheus (the ssh tunnel to the head, then the URL), and Grafana with monitoring.grafana. */
    public readonly prometheus: string;
    /** With monitoring.grafana: its admin password (a secret, generated here); otherwise undefined. */
    public readonly grafanaAdminPassword?: pulumi.Output<string>;

    private readonly m: MonitoringConfig;
    private readonly head: SparkNode;

    constructor(
        name: string,
        private readonly args: MonitoringArgs,
        opts?: pulumi.ComponentResourceOptions,
    ) {
        super("vllm-cluster:index:Monitoring", name, {}, opts);
        const { cfg } = args;
        if (cfg.monitoring === undefined) throw new Error(`${name}: the monitoring section is not set`);
        this.m = cfg.monitoring;
        const head = args.nodes.find((n) => n.node.name === cfg.head.name);
        if (head === undefined) throw new Error(`${name}: the head ${cfg.head.name} is not among the nodes`);
        this.head = head;

        const exporterRef = this.m.nodeExporterImage ?? this.m.image;
        const images = new Map(
            [...new Set([this.m.image, exporterRef])].map((ref, i) => [
                ref,
                this.images(`${name}-image${i === 0 ? "" : "-node-exporter"}`, ref, args.nodes),
            ]),
        );
        for (const n of args.nodes) {
            new docker.Container(
                `${name}-node-exporter-${n.node.name}`,
                nodeExporterContainerArgs(this.input(n, exporterRef, images.get(exporterRef)!.imageIds[n.node.name])),
                { parent: this, provider: n.provider, deleteBeforeReplace: true, dependsOn: [n.preflight] },
            );
        }
        const prometheus = this.prometheusOnHead(name, images.get(this.m.image)!);
        if (this.m.grafana) this.grafanaAdminPassword = this.grafanaOnHead(name, this.m.grafana.image, prometheus);

        this.prometheus = prometheusHint(this.m, cfg.head, cfg.ssh);
        this.registerOutputs({ prometheus: this.prometheus, grafanaAdminPassword: this.grafanaAdminPassword });
    }

    /** `ref` made present on `nodes`, from the head (source: host) or a registry. */
    private images(name: string, ref: string, nodes: SparkNode[]): ImageDistribution {
        const { cfg } = this.args;
        const source = this.m.source;
        const after = this.args.nodes.map((n) => n.preflight);
        return new ImageDistribution(
            name,
            {
                ref,
                source,
                sourceNode: source === "host" ? cfg.head.name : undefined,
                distribution: cfg.image.distribution,
                nodes,
                after,
            },
            { parent: this },
        );
    }

    private input(n: SparkNode, imageRef: string, imageId: pulumi.Input<string>): MonitoringContainerInput {
        return { stack: this.args.stack, cluster: this.args.cluster, cfg: this.args.cfg, node: n.node, imageId, imageRef };
    }

    /** Prometheus and its TSDB volume on the head. */
    private prometheusOnHead(name: string, image: ImageDistribution): docker.Container {
        const head = this.head;
        const volume = new docker.Volume(
            `${name}-prometheus-data`,
            { name: `${containerNames(this.args.cluster).prometheus}-data` },
            { parent: this, provider: head.provider, dependsOn: [head.preflight] },
        );
        const input = this.input(head, this.m.image, image.imageIds[head.node.name]);
        return new docker.Container(`${name}-prometheus`, prometheusContainerArgs(input, volume.name, this.args.serveCert), {
            parent: this,
            provider: head.provider,
            deleteBeforeReplace: true,
            dependsOn: [head.preflight, ...this.args.after],
        });
    }

    /** Grafana on the head only: its own image distribution, a generated admin password, its database in a volume. */
    private grafanaOnHead(name: string, ref: string, prometheus: docker.Container): pulumi.Output<string> {
        const head = this.head;
        const image = this.images(`${name}-grafana-image`, ref, [head]);
        const password = new random.RandomPassword(`${name}-grafana-admin`, { length: 24, special: false }, { parent: this });
        const secret = pulumi.secret(password.result);
        const data = new docker.Volume(
            `${name}-grafana-data`,
            { name: `${containerNames(this.args.cluster).grafana}-data` },
            { parent: this, provider: head.provider, dependsOn: [head.preflight] },
        );
        const input = this.input(head, ref, image.imageIds[head.node.name]);
        new docker.Container(`${name}-grafana`, grafanaContainerArgs(input, data.name, secret), {
            parent: this,
            provider: head.provider,
            deleteBeforeReplace: true,
            dependsOn: [prometheus],
        });
        return secret;
    }
}

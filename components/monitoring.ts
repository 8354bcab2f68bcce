/**
 * Monitoring (`monitoring`): Prometheus on the head, a node exporter on every host, and their images on the hosts.
 * It owns its containers; what they run is built by infra/builders/monitoring.ts from the config alone.
 */
import * as docker from "@pulumi/docker";
import * as pulumi from "@pulumi/pulumi";
import * as random from "@pulumi/random";
import type { ClusterConfig } from "../infra/config";
import { containerNames } from "../infra/contract";
import { grafanaContainerArgs, nodeExporterContainerArgs, prometheusContainerArgs, prometheusHint } from "../infra/builders/monitoring";
import { ImageDistribution } from "./imageDistribution";
import { SparkNode } from "./sparkNode";

export interface MonitoringArgs {
    cfg: ClusterConfig;
    stack: string;
    /** The cluster's name: it names the containers and the TSDB volume on the head. */
    cluster: string;
    /** Every host, the head among them. */
    nodes: SparkNode[];
    /** What Prometheus starts after: the serve endpoint. */
    after: pulumi.Input<pulumi.Resource>[];
    /** With serve.tls: the API's certificate (PEM), which Prometheus trusts, and nothing else, for vLLM's /metrics. */
    serveCert?: string;
}

/**
 * The images are made present on every host as the cluster's own image is (monitoring.source: registry pulls on each
 * host; host copies from the head along image.distribution), one distribution per distinct reference; then a node
 * exporter on each host (after its preflight) and Prometheus on the head (after `after`), with its TSDB in a volume.
 */
export class Monitoring extends pulumi.ComponentResource {
    /** How to reach Prometheus (the ssh tunnel to the head, then the URL), and Grafana with monitoring.grafana. */
    public readonly prometheus: string;
    /** With monitoring.grafana: its admin password (a secret, generated here); otherwise undefined. */
    public readonly grafanaAdminPassword?: pulumi.Output<string>;

    constructor(name: string, args: MonitoringArgs, opts?: pulumi.ComponentResourceOptions) {
        super("vllm-cluster:index:Monitoring", name, {}, opts);
        const { cfg } = args;
        const m = cfg.monitoring;
        if (m === undefined) throw new Error(`${name}: the monitoring section is not set`);
        const head = args.nodes.find((n) => n.node.name === cfg.head.name);
        if (head === undefined) throw new Error(`${name}: the head ${cfg.head.name} is not among the nodes`);
        const preflights = args.nodes.map((n) => n.preflight);

        const refs = [...new Set([m.image, m.nodeExporterImage ?? m.image])];
        const images = new Map(
            refs.map((ref, i) => [
                ref,
                new ImageDistribution(
                    `${name}-image${i === 0 ? "" : "-node-exporter"}`,
                    {
                        ref,
                        source: m.source,
                        sourceNode: m.source === "host" ? cfg.head.name : undefined,
                        distribution: cfg.image.distribution,
                        nodes: args.nodes,
                        after: preflights,
                    },
                    { parent: this },
                ),
            ]),
        );
        const exporterRef = m.nodeExporterImage ?? m.image;
        const input = (n: SparkNode, ref: string, imageId: pulumi.Input<string> = images.get(ref)!.imageIds[n.node.name]) => ({
            stack: args.stack,
            cluster: args.cluster,
            cfg,
            node: n.node,
            imageId,
            imageRef: ref,
        });

        for (const n of args.nodes) {
            new docker.Container(`${name}-node-exporter-${n.node.name}`, nodeExporterContainerArgs(input(n, exporterRef)), {
                parent: this,
                provider: n.provider,
                deleteBeforeReplace: true,
                dependsOn: [n.preflight],
            });
        }

        const volume = new docker.Volume(
            `${name}-prometheus-data`,
            { name: `${containerNames(args.cluster).prometheus}-data` },
            { parent: this, provider: head.provider, dependsOn: [head.preflight] },
        );
        const prometheus = new docker.Container(
            `${name}-prometheus`,
            prometheusContainerArgs(input(head, m.image), volume.name, args.serveCert),
            {
                parent: this,
                provider: head.provider,
                deleteBeforeReplace: true,
                dependsOn: [head.preflight, ...args.after],
            },
        );

        if (m.grafana) {
            // on the head only: its own image distribution, a generated admin password, its database in a volume
            const image = new ImageDistribution(
                `${name}-grafana-image`,
                {
                    ref: m.grafana.image,
                    source: m.source,
                    sourceNode: m.source === "host" ? cfg.head.name : undefined,
                    nodes: [head],
                    after: preflights,
                },
                { parent: this },
            );
            const password = new random.RandomPassword(`${name}-grafana-admin`, { length: 24, special: false }, { parent: this });
            this.grafanaAdminPassword = pulumi.secret(password.result);
            const data = new docker.Volume(
                `${name}-grafana-data`,
                { name: `${containerNames(args.cluster).grafana}-data` },
                { parent: this, provider: head.provider, dependsOn: [head.preflight] },
            );
            const grafanaInput = input(head, m.grafana.image, image.imageIds[head.node.name]);
            new docker.Container(`${name}-grafana`, grafanaContainerArgs(grafanaInput, data.name, this.grafanaAdminPassword), {
                parent: this,
                provider: head.provider,
                deleteBeforeReplace: true,
                dependsOn: [prometheus],
            });
        }

        this.prometheus = prometheusHint(m, cfg.head, cfg.ssh);
        this.registerOutputs({ prometheus: this.prometheus, grafanaAdminPassword: this.grafanaAdminPassword });
    }
}

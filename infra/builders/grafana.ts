/**
 * Grafana on the head (`monitoring.grafana`): its container as Docker provider arguments and its provisioning (Prometheus
 * as the data source, the shipped dashboards). components/monitoring.ts makes it.
 */
import * as fs from "fs";
import * as path from "path";
import type * as docker from "@pulumi/docker";
import type * as pulumi from "@pulumi/pulumi";
import type { MonitoringConfig, NodeConfig } from "../config";
import { containerNames } from "../contract";
import { MonitoringContainerInput, grafanaAddress, monitoringLabels, prometheusAddress } from "./monitoring";

/** Grafana's files inside its container (monitoring.grafana), uploaded at create. */
export const GRAFANA_PROVISIONING = "/etc/vllm-cluster/grafana/provisioning";
export const GRAFANA_DASHBOARDS = "/etc/vllm-cluster/grafana/dashboards";
export const GRAFANA_PASSWORD_FILE = "/etc/vllm-cluster/grafana/admin-password";
export const GRAFANA_DATA = "/var/lib/grafana";
/** The provisioned Prometheus data source's uid, which the dashboards' panels name. */
export const GRAFANA_DATASOURCE_UID = "vllm-cluster-prometheus";
export const GRAFANA_MEMORY_MB = 512;

/** The dashboards the program ships (infra/dashboards, written by npm run docs), their data source made the provisioned one. */
export function provisionedDashboards(dir = path.join(__dirname, "..", "dashboards")): { file: string; content: string }[] {
    return fs
        .readdirSync(dir)
        .filter((f) => f.endsWith(".json"))
        .sort()
        .map((f) => {
            const d = JSON.parse(fs.readFileSync(path.join(dir, f), "utf8")) as Record<string, unknown>;
            delete d.__inputs;
            const text = JSON.stringify(d, null, 2).split("${DS_PROMETHEUS}").join(GRAFANA_DATASOURCE_UID);
            return { file: `${GRAFANA_DASHBOARDS}/${f}`, content: `${text}\n` };
        });
}

/** Grafana's provisioning: Prometheus (on the head, where it listens) as its only data source, the dashboards' folder. */
export function grafanaProvisioning(m: MonitoringConfig, head: NodeConfig): { file: string; content: string }[] {
    const datasources = {
        apiVersion: 1,
        datasources: [
            {
                name: "Prometheus",
                uid: GRAFANA_DATASOURCE_UID,
                type: "prometheus",
                access: "proxy",
                url: `http://${prometheusAddress(m, head)}`,
                isDefault: true,
                editable: false,
            },
        ],
    };
    const dashboards = {
        apiVersion: 1,
        providers: [
            {
                name: "vllm-cluster",
                folder: "vLLM cluster",
                type: "file",
                disableDeletion: true,
                allowUiUpdates: false,
                options: { path: GRAFANA_DASHBOARDS },
            },
        ],
    };
    return [
        { file: `${GRAFANA_PROVISIONING}/datasources/vllm-cluster.yaml`, content: `${JSON.stringify(datasources, null, 2)}\n` },
        { file: `${GRAFANA_PROVISIONING}/dashboards/vllm-cluster.yaml`, content: `${JSON.stringify(dashboards, null, 2)}\n` },
    ];
}

/**
 * Grafana on the head (monitoring.grafana): host network, bound to loopback or the fabric, its admin password from a
 * file (never in its environment, which docker inspect shows), no sign-up, no anonymous access, nothing sent home.
 */
export function grafanaContainerArgs(
    p: MonitoringContainerInput,
    volume: pulumi.Input<string>,
    adminPassword: pulumi.Input<string>,
): docker.ContainerArgs {
    const m = p.cfg.monitoring!;
    const g = m.grafana!;
    const [addr, port] = [grafanaAddress(g, p.node).split(":")[0], String(g.port)];
    return {
        name: containerNames(p.cluster).grafana,
        image: p.imageId,
        networkMode: "host",
        envs: [
            `GF_SERVER_HTTP_ADDR=${addr}`,
            `GF_SERVER_HTTP_PORT=${port}`,
            "GF_SECURITY_ADMIN_USER=admin",
            `GF_SECURITY_ADMIN_PASSWORD__FILE=${GRAFANA_PASSWORD_FILE}`,
            `GF_PATHS_PROVISIONING=${GRAFANA_PROVISIONING}`,
            "GF_USERS_ALLOW_SIGN_UP=false",
            "GF_AUTH_ANONYMOUS_ENABLED=false",
            "GF_ANALYTICS_REPORTING_ENABLED=false",
            "GF_ANALYTICS_CHECK_FOR_UPDATES=false",
            "GF_ANALYTICS_CHECK_FOR_PLUGIN_UPDATES=false",
            "GF_NEWS_NEWS_FEED_ENABLED=false",
        ],
        uploads: [...grafanaProvisioning(m, p.node), ...provisionedDashboards(), { file: GRAFANA_PASSWORD_FILE, content: adminPassword }],
        volumes: [{ volumeName: volume, containerPath: GRAFANA_DATA }],
        labels: monitoringLabels(p, "grafana"),
        memory: GRAFANA_MEMORY_MB,
        // no swap beyond it (unset, Docker doubles it, and the provider reads that back as a change on every up)
        memorySwap: GRAFANA_MEMORY_MB,
        restart: "unless-stopped",
        mustRun: true,
        wait: false,
        destroyGraceSeconds: 30,
    };
}

/** The `monitoring` section: Prometheus on the head and a node exporter on every host (components/monitoring.ts). */
import { z } from "zod";
import { int, oneOf, optional, pattern, port, required, section, withDefault } from "./fields";
import { IMAGE_REF_RE } from "./sections";

const MONITORING_PORT =
    "distinct from every other port opened on its host (nodes[].sshPort, the backend's ports); outside " +
    "ray.minWorkerPort..maxWorkerPort (backend ray)";

/**
 * `monitoring.grafana`: Grafana on the head with Prometheus as its data source and the dashboards provisioned. Not run
 * on the simulated hosts (no Grafana image can be had there): its container is tested as the program registers it.
 */
export const grafanaFields = {
    image: required(pattern(IMAGE_REF_RE, "image reference")).describe(
        "The Grafana image (grafana/grafana, pinned by digest); it runs with its own entrypoint.",
    ),
    listen: withDefault(oneOf(["loopback", "fabric"]), "loopback").describe(
        "Where Grafana listens on the head: loopback (reach it through an ssh tunnel) or the head's fabric IP.",
    ),
    port: port(3000).meta({ description: "Grafana's port on the head.", across: MONITORING_PORT }),
};

/**
 * `monitoring`: Prometheus on the head and a node exporter on every host (components/monitoring.ts), scraping the
 * API server, Ray's metrics and the hosts over the fabric. Neither listens on the management network.
 */
export const monitoringFields = {
    image: required(pattern(IMAGE_REF_RE, "image reference")).describe(
        "The Prometheus image: its /bin/prometheus runs (prom/prometheus, or the testbed's vllm-cluster-monitoring, built " +
            "from Debian's prometheus package).",
    ),
    nodeExporterImage: optional(pattern(IMAGE_REF_RE, "image reference")).describe(
        "The node exporter image: its /bin/node_exporter runs (prom/node-exporter); unset: `image`.",
    ),
    source: withDefault(oneOf(["registry", "host"]), "registry").describe(
        "registry: each host pulls the images; host: they are on the head already and are copied to the other hosts as " +
            "image.distribution says.",
    ),
    listen: withDefault(oneOf(["loopback", "fabric"]), "loopback").describe(
        "Where Prometheus listens on the head: loopback (reach it through an ssh tunnel) or the head's fabric IP. Never " +
            "the management network.",
    ),
    port: port(9090).meta({ description: "Prometheus's port on the head.", across: MONITORING_PORT }),
    nodeExporterPort: port(9100).meta({
        description: "The node exporter's port, on each host's fabric IP (Prometheus scrapes it over the fabric).",
        across: MONITORING_PORT,
    }),
    scrapeIntervalSeconds: int({ min: 1, max: 3600, what: "seconds, at most an hour" })
        .default(15)
        .describe("Seconds between two scrapes of every target."),
    grafana: optional(section(grafanaFields)).describe(
        "Grafana on the head, its admin password generated (stack output grafanaAdminPassword, a secret), Prometheus its " +
            "data source and the dashboards provisioned. Untested here: no Grafana image can be had on the simulated hosts.",
    ),
    retention: withDefault(pattern(/^[1-9][0-9]{0,5}[hdwy]$/, "duration (a number and h, d, w or y, e.g. 15d)"), "15d").describe(
        "How long Prometheus keeps samples (its --storage.tsdb.retention.time), in a Docker volume on the head.",
    ),
};

export const monitoringSchema = section(monitoringFields);

export type MonitoringConfig = z.output<typeof monitoringSchema>;

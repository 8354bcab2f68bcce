/**
 * The monitoring containers (`monitoring`): Prometheus on the head and a node exporter on every host, as Docker
 * provider arguments built from plain values, and Prometheus's own files (its scrape config and the rules that carry
 * the config's memory floors and crash budgets as series). components/monitoring.ts makes them.
 */
import * as docker from "@pulumi/docker";
import type * as pulumi from "@pulumi/pulumi";
import type { ClusterConfig, MonitoringConfig, NodeConfig, SshConfig } from "../config";
import { containerNames, containerPorts, portSettingsOf, portsLabel } from "../contract";
import { floorKib } from "./containerInit";
import { containerLimits } from "./containers";
import { containerLabels, labelList } from "./labels";
import { initHostDir } from "./node";
import { shellQuote } from "./quote";

/** Where Prometheus finds its files inside its container (uploaded at create: a change replaces the container). */
export const PROMETHEUS_CONFIG = "/etc/vllm-cluster/prometheus.yml";
export const PROMETHEUS_RULES = "/etc/vllm-cluster/rules.yml";
/** The serve certificate (public; uploaded): Prometheus's only trust for the API's /metrics over TLS. */
export const PROMETHEUS_TLS_CA = "/etc/vllm-cluster/serve-cert.pem";
/** The TSDB, in a Docker volume on the head; owned by nobody (65534) in the image, as in prom/prometheus. */
export const PROMETHEUS_DATA = "/prometheus";
/** The crash budget files of the node's containers (container_init.sh's `<container>.starts`), read-only. */
export const NODE_EXPORTER_INIT_DIR = "/vllm-cluster/init";
/** Where the node exporter's textfile collector reads the crash budgets (a tmpfs the container's loop writes). */
export const NODE_EXPORTER_TEXTFILE_DIR = "/vllm-cluster/textfile";

/** A container's memory ceiling: small, fixed, and on every host (a unified-memory host freezes without one). */
export const PROMETHEUS_MEMORY_MB = 1024;
export const NODE_EXPORTER_MEMORY_MB = 128;

/** The address Prometheus listens on: the head's loopback, or its fabric IP; never the management network. */
export function prometheusAddress(m: MonitoringConfig, head: NodeConfig): string {
    return `${m.listen === "fabric" ? head.fabricIp : "127.0.0.1"}:${m.port}`;
}

/** The address Grafana listens on (monitoring.grafana): the head's loopback, or its fabric IP. */
export function grafanaAddress(g: NonNullable<MonitoringConfig["grafana"]>, head: NodeConfig): string {
    return `${g.listen === "fabric" ? head.fabricIp : "127.0.0.1"}:${g.port}`;
}

/**
 * How the operator reaches Prometheus: an ssh tunnel to the head with the stack's own key and known_hosts (the only
 * ones the program trusts), then the local URL.
 */
export function prometheusHint(m: MonitoringConfig, head: NodeConfig, ssh: SshConfig): string {
    const at = prometheusAddress(m, head);
    const opts = `-i ${shellQuote(ssh.privateKeyPath)} -o UserKnownHostsFile=${shellQuote(ssh.knownHostsFile)} -p ${head.sshPort}`;
    const prometheus = `ssh -N -L ${m.port}:${at} ${opts} ${head.sshUser}@${head.sshHost}, then open http://127.0.0.1:${m.port}`;
    if (m.grafana === undefined) return prometheus;
    const g = m.grafana;
    return (
        `Prometheus: ${prometheus}; Grafana: ssh -N -L ${g.port}:${grafanaAddress(g, head)} ${opts} ${head.sshUser}@${head.sshHost}, ` +
        `then open http://127.0.0.1:${g.port} as admin (pulumi stack output grafanaAdminPassword --show-secrets)`
    );
}

/** Every scrape job: the API server, Ray's metrics on each host (backend ray), each host's node exporter, Prometheus. */
export function prometheusConfig(cfg: ClusterConfig, m: MonitoringConfig): string {
    const serveHost = cfg.serve.host === "0.0.0.0" ? "127.0.0.1" : cfg.serve.host;
    const tls = cfg.serve.tls !== undefined;
    const node = (n: NodeConfig, port: number) => ({ targets: [`${n.fabricIp}:${port}`], labels: { node: n.name } });
    const jobs: Record<string, unknown>[] = [
        {
            job_name: "vllm",
            scheme: tls ? "https" : "http",
            // /metrics is open (the API guard's OPEN list); over TLS the stack's own certificate is the only trust,
            // checked for the name it was issued to (the head's management address, which clients use)
            ...(tls ? { tls_config: { ca_file: PROMETHEUS_TLS_CA, server_name: cfg.head.sshHost } } : {}),
            static_configs: [{ targets: [`${serveHost}:${cfg.serve.port}`], labels: { node: cfg.head.name } }],
        },
        ...(cfg.backend === "ray" ? [{ job_name: "ray", static_configs: cfg.nodes.map((n) => node(n, cfg.ray.metricsExportPort)) }] : []),
        { job_name: "node", static_configs: cfg.nodes.map((n) => node(n, m.nodeExporterPort)) },
        { job_name: "prometheus", static_configs: [{ targets: [prometheusAddress(m, cfg.head)], labels: { node: cfg.head.name } }] },
    ];
    const config = {
        global: { scrape_interval: `${m.scrapeIntervalSeconds}s`, evaluation_interval: `${m.scrapeIntervalSeconds}s` },
        rule_files: [PROMETHEUS_RULES],
        scrape_configs: jobs,
    };
    // JSON is YAML: every name and address is quoted by the serializer, never spliced into text
    return `${JSON.stringify(config, null, 2)}\n`;
}

/** The containers of each node whose crash budget container_init.sh keeps, with their most starts. */
export function budgetedContainers(cfg: ClusterConfig, cluster: string, n: NodeConfig): { container: string; maxStarts: number }[] {
    const names = containerNames(cluster);
    const serveMax = containerLimits(cfg, true).maxRestarts + 1;
    const rayMax = containerLimits(cfg, false).maxRestarts + 1;
    if (cfg.backend === "native") return [{ container: names.serve, maxStarts: serveMax }];
    return n.name === cfg.head.name
        ? [
              { container: names.rayHead, maxStarts: rayMax },
              { container: names.serve, maxStarts: serveMax },
          ]
        : [{ container: names.rayWorker, maxStarts: rayMax }];
}

/**
 * Constant series from the config, for the dashboards: each host's memory floor (memoryGuard.minAvailable, as the
 * guard applies it) and each container's most starts (its crash budget), labelled by node and container.
 */
export function prometheusRules(cfg: ClusterConfig, cluster: string): string {
    const rules = cfg.nodes.flatMap((n) => [
        { record: "vllm_cluster_memory_floor_bytes", expr: `vector(${floorKib(n, cfg.memoryGuard) * 1024})`, labels: { node: n.name } },
        ...budgetedContainers(cfg, cluster, n).map((c) => ({
            record: "vllm_cluster_container_max_starts",
            expr: `vector(${c.maxStarts})`,
            labels: { node: n.name, container: c.container },
        })),
    ]);
    return `${JSON.stringify({ groups: [{ name: "vllm-cluster", rules }] }, null, 2)}\n`;
}

/**
 * The node exporter's PID 1 (sh, which every image of it has): every 15 s it writes the crash budgets of the node's
 * containers (`<container>.starts`: "<container id> <starts>") as vllm_cluster_container_starts for the textfile
 * collector, skipping any file whose name or content is not what container_init.sh writes; it ends when
 * node_exporter does, so Docker's restart policy restarts both.
 */
export const NODE_EXPORTER_LOOP = [
    "set -u",
    '/bin/node_exporter "$@" & pid=$!',
    `out=${NODE_EXPORTER_TEXTFILE_DIR}/vllm_cluster.prom`,
    'while kill -0 "$pid" 2>/dev/null; do',
    "  {",
    "    echo '# HELP vllm_cluster_container_starts Starts since the container last became healthy (its crash budget used).'",
    "    echo '# TYPE vllm_cluster_container_starts gauge'",
    `    for f in ${NODE_EXPORTER_INIT_DIR}/*.starts; do`,
    '      [ -f "$f" ] || continue',
    "      name=${f##*/}; name=${name%.starts}",
    '      case "$name" in ""|*[!A-Za-z0-9_.-]*) continue ;; esac',
    '      read -r _ n < "$f" 2>/dev/null || continue',
    '      case "$n" in ""|*[!0-9]*) continue ;; esac',
    '      printf \'vllm_cluster_container_starts{container="%s"} %s\\n\' "$name" "$n"',
    "    done",
    '  } > "$out.tmp" && mv "$out.tmp" "$out"',
    "  sleep 15",
    "done",
    'wait "$pid"',
].join("\n");

/** What both monitoring containers take: the stack, the cluster, the node, the image ID there and its reference. */
export interface MonitoringContainerInput {
    stack: string;
    cluster: string;
    cfg: ClusterConfig;
    node: NodeConfig;
    imageId: docker.ContainerArgs["image"];
    imageRef: string;
}

export function monitoringLabels(
    p: MonitoringContainerInput,
    kind: "prometheus" | "node-exporter" | "grafana",
): { label: string; value: string }[] {
    const ports = portsLabel(containerPorts(kind, portSettingsOf(p.cfg)));
    return labelList(
        containerLabels({ stack: p.stack, cluster: p.cluster, role: "monitoring", node: p.node, imageRef: p.imageRef, ports }),
    );
}

/**
 * Prometheus on the head: host network, bound to loopback or the fabric, as nobody; its files and, with serve.tls, the
 * API's certificate (public) uploaded, so no host path is mounted (the certificate's copy on the head is mode 600);
 * the TSDB in `volume`.
 */
export function prometheusContainerArgs(
    p: MonitoringContainerInput,
    volume: pulumi.Input<string>,
    serveCert: string | undefined,
): docker.ContainerArgs {
    const m = p.cfg.monitoring!;
    return {
        name: containerNames(p.cluster).prometheus,
        image: p.imageId,
        networkMode: "host",
        entrypoints: ["/bin/prometheus"],
        command: [
            `--config.file=${PROMETHEUS_CONFIG}`,
            `--storage.tsdb.path=${PROMETHEUS_DATA}`,
            `--storage.tsdb.retention.time=${m.retention}`,
            `--web.listen-address=${prometheusAddress(m, p.node)}`,
        ],
        user: "65534:65534",
        uploads: [
            { file: PROMETHEUS_CONFIG, content: prometheusConfig(p.cfg, m) },
            { file: PROMETHEUS_RULES, content: prometheusRules(p.cfg, p.cluster) },
            ...(serveCert !== undefined ? [{ file: PROMETHEUS_TLS_CA, content: serveCert }] : []),
        ],
        volumes: [{ volumeName: volume, containerPath: PROMETHEUS_DATA }],
        labels: monitoringLabels(p, "prometheus"),
        memory: PROMETHEUS_MEMORY_MB,
        // no swap beyond it (unset, Docker doubles it, and the provider reads that back as a change on every up)
        memorySwap: PROMETHEUS_MEMORY_MB,
        restart: "unless-stopped",
        mustRun: true,
        wait: false,
        destroyGraceSeconds: 30,
    };
}

/**
 * The node exporter on every host: host network (it reports the host's interfaces) and PID namespace, bound to the
 * fabric IP only, the node's crash budget files read-only; no host path beyond them (no root file system mount).
 */
export function nodeExporterContainerArgs(p: MonitoringContainerInput): docker.ContainerArgs {
    const m = p.cfg.monitoring!;
    return {
        name: containerNames(p.cluster).nodeExporter,
        image: p.imageId,
        networkMode: "host",
        pidMode: "host",
        entrypoints: ["/bin/sh", "-c", NODE_EXPORTER_LOOP, "node-exporter"],
        command: [
            `--web.listen-address=${p.node.fabricIp}:${m.nodeExporterPort}`,
            `--collector.textfile.directory=${NODE_EXPORTER_TEXTFILE_DIR}`,
        ],
        // the budget files are root's (the state directory is private to the login user)
        user: "0:0",
        mounts: [
            { type: "bind", source: initHostDir(p.cfg.stateDir, p.node.name), target: NODE_EXPORTER_INIT_DIR, readOnly: true },
            { type: "tmpfs", target: NODE_EXPORTER_TEXTFILE_DIR, tmpfsOptions: { sizeBytes: 1024 * 1024 } },
        ],
        labels: monitoringLabels(p, "node-exporter"),
        memory: NODE_EXPORTER_MEMORY_MB,
        // no swap beyond it (unset, Docker doubles it, and the provider reads that back as a change on every up)
        memorySwap: NODE_EXPORTER_MEMORY_MB,
        restart: "unless-stopped",
        mustRun: true,
        wait: false,
        destroyGraceSeconds: 10,
    };
}

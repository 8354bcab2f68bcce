// @ts-check
"use strict";
/**
 * The Grafana dashboards of `monitoring` (infra/dashboards/*.json), written from the panels below by `npm run docs`
 * (setup/docs.js) and checked by `node setup/docs.js --check`. The integration test runs every panel's query against
 * the cluster's own Prometheus, so a panel that names a series nobody exports fails there.
 */

/** @typedef {{ title: string, unit: string, queries: { expr: string, legend: string }[], description: string }} Panel */

/** @type {{ file: string, title: string, uid: string, panels: Panel[] }[]} */
const DASHBOARDS = [
    {
        file: "vllm-cluster.json",
        title: "vLLM cluster",
        uid: "vllm-cluster",
        panels: [
            {
                title: "Generation tokens per second",
                unit: "short",
                description: "Tokens generated per second by the API server, over the last minute.",
                queries: [{ expr: "sum by (model_name) (rate(vllm:generation_tokens_total[1m]))", legend: "{{model_name}}" }],
            },
            {
                title: "Prompt tokens per second",
                unit: "short",
                description: "Prompt tokens processed per second, over the last minute.",
                queries: [{ expr: "sum by (model_name) (rate(vllm:prompt_tokens_total[1m]))", legend: "{{model_name}}" }],
            },
            {
                title: "Requests running and waiting",
                unit: "short",
                description: "Requests in the engine now, and requests queued behind them.",
                queries: [
                    { expr: "sum(vllm:num_requests_running)", legend: "running" },
                    { expr: "sum(vllm:num_requests_waiting)", legend: "waiting" },
                ],
            },
            {
                title: "KV cache usage",
                unit: "percentunit",
                description: "The share of the KV cache in use (1 is full: new requests wait).",
                queries: [{ expr: "max(vllm:kv_cache_usage_perc)", legend: "KV cache" }],
            },
            {
                title: "Time to first token",
                unit: "s",
                description: "p50 and p95 over the last five minutes.",
                queries: [
                    { expr: "histogram_quantile(0.5, sum by (le) (rate(vllm:time_to_first_token_seconds_bucket[5m])))", legend: "p50" },
                    { expr: "histogram_quantile(0.95, sum by (le) (rate(vllm:time_to_first_token_seconds_bucket[5m])))", legend: "p95" },
                ],
            },
            {
                title: "Request latency, end to end",
                unit: "s",
                description: "p50 and p95 over the last five minutes.",
                queries: [
                    { expr: "histogram_quantile(0.5, sum by (le) (rate(vllm:e2e_request_latency_seconds_bucket[5m])))", legend: "p50" },
                    { expr: "histogram_quantile(0.95, sum by (le) (rate(vllm:e2e_request_latency_seconds_bucket[5m])))", legend: "p95" },
                ],
            },
            {
                title: "Memory headroom above the floor",
                unit: "bytes",
                description:
                    "Each host's MemAvailable less the memory guard's floor (memoryGuard.minAvailable): at 0 the guard stops " +
                    "the cluster's containers.",
                queries: [{ expr: "node_memory_MemAvailable_bytes - on (node) vllm_cluster_memory_floor_bytes", legend: "{{node}}" }],
            },
            {
                title: "Crash budget used",
                unit: "percentunit",
                description:
                    "Starts without becoming healthy, against the most allowed (serve.maxRestarts + 1, ray.maxRestarts + 1): at 1 " +
                    "the container stays stopped.",
                queries: [
                    {
                        expr: "vllm_cluster_container_starts / on (node, container) vllm_cluster_container_max_starts",
                        legend: "{{node}} {{container}}",
                    },
                ],
            },
            {
                title: "Targets up",
                unit: "short",
                description: "Targets that answered their last scrape, by job (vllm, ray, node, prometheus).",
                queries: [{ expr: "sum by (job) (up)", legend: "{{job}}" }],
            },
        ],
    },
];

/**
 * A Grafana dashboard (schema 39) of `d`, its Prometheus data source an input chosen at import.
 * @param {{ title: string, uid: string, panels: Panel[] }} d
 */
function grafanaDashboard(d) {
    return {
        __inputs: [{ name: "DS_PROMETHEUS", label: "Prometheus", type: "datasource", pluginId: "prometheus", pluginName: "Prometheus" }],
        title: d.title,
        uid: d.uid,
        schemaVersion: 39,
        version: 1,
        editable: true,
        refresh: "30s",
        time: { from: "now-1h", to: "now" },
        tags: ["vllm", "vllm-cluster"],
        panels: d.panels.map((/** @type {Panel} */ p, /** @type {number} */ i) => ({
            id: i + 1,
            type: "timeseries",
            title: p.title,
            description: p.description,
            datasource: { type: "prometheus", uid: "${DS_PROMETHEUS}" },
            gridPos: { h: 8, w: 12, x: (i % 2) * 12, y: Math.floor(i / 2) * 8 },
            fieldConfig: { defaults: { unit: p.unit }, overrides: [] },
            options: { legend: { displayMode: "list", placement: "bottom" }, tooltip: { mode: "multi" } },
            targets: p.queries.map((q, /** @type {number} */ j) => ({
                refId: String.fromCharCode(65 + j),
                datasource: { type: "prometheus", uid: "${DS_PROMETHEUS}" },
                expr: q.expr,
                legendFormat: q.legend,
            })),
        })),
    };
}

/** Every dashboard file: its path under the repository and its text. */
function dashboardFiles() {
    return DASHBOARDS.map((d) => ({ path: `infra/dashboards/${d.file}`, text: `${JSON.stringify(grafanaDashboard(d), null, 2)}\n` }));
}

module.exports = { DASHBOARDS, dashboardFiles, grafanaDashboard };

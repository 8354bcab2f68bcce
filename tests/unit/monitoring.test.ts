// `monitoring`: its config keys, Prometheus's files, the two containers as the program registers them, and the
// dashboards' files. That the queries return data from a real Prometheus is tested on the simulated hosts
// (tests/integration/cluster.test.ts, "monitoring").
import { spawnSync } from "child_process";
import * as fs from "fs";
import * as os from "os";
import * as path from "path";
import { ClusterConfig, validateConfig } from "../../infra/config";
import * as pulumi from "@pulumi/pulumi";
import { GRAFANA_DASHBOARDS, GRAFANA_DATASOURCE_UID, GRAFANA_PASSWORD_FILE, GRAFANA_PROVISIONING } from "../../infra/builders/grafana";
import {
    NODE_EXPORTER_INIT_DIR,
    NODE_EXPORTER_LOOP,
    NODE_EXPORTER_TEXTFILE_DIR,
    PROMETHEUS_TLS_CA,
    prometheusConfig,
    prometheusHint,
    prometheusRules,
} from "../../infra/builders/monitoring";
import { nodeListenPorts } from "../../infra/builders/ports";
import { TEST_TLS, deepClone, loadStackRaw, problems, runStack } from "./harness";

// eslint-disable-next-line @typescript-eslint/no-require-imports
const { DASHBOARDS, dashboardFiles } = require("../../setup/dashboards") as {
    DASHBOARDS: { panels: { queries: { expr: string }[] }[] }[];
    dashboardFiles: () => { path: string; text: string }[];
};

type Raw = Record<string, any>; // eslint-disable-line @typescript-eslint/no-explicit-any
const ROOT = path.join(__dirname, "..", "..");
const MON = { image: "prom/prometheus:v2.53.0", nodeExporterImage: "prom/node-exporter:v1.8.1" };

function withMonitoring(stack: string, m: Raw = MON, edit: (raw: Raw) => void = () => undefined): Raw {
    const raw = deepClone(loadStackRaw(stack)) as Raw;
    raw.monitoring = m;
    edit(raw);
    return raw;
}

describe("monitoring config", () => {
    test("unset: no monitoring container and no port claimed", () => {
        const raw = deepClone(loadStackRaw("spark")) as Raw;
        delete raw.monitoring;
        const cfg = validateConfig(raw);
        expect(cfg.monitoring).toBeUndefined();
        expect(nodeListenPorts(cfg, cfg.head)).not.toContain(9090);
        expect(nodeListenPorts(cfg, cfg.workers[0])).not.toContain(9100);
    });

    test("defaults: registry, loopback, 9090 on the head and 9100 on every host, 15 s, 15 days", () => {
        const cfg = validateConfig(withMonitoring("spark"));
        expect(cfg.monitoring).toEqual({
            ...MON,
            source: "registry",
            listen: "loopback",
            port: 9090,
            nodeExporterPort: 9100,
            scrapeIntervalSeconds: 15,
            retention: "15d",
        });
        expect(nodeListenPorts(cfg, cfg.head)).toEqual(expect.arrayContaining([9090, 9100]));
        expect(nodeListenPorts(cfg, cfg.workers[0])).toContain(9100);
        expect(nodeListenPorts(cfg, cfg.workers[0])).not.toContain(9090);
    });

    test.each<[string, Raw, string]>([
        ["the management network", { ...MON, listen: "management" }, 'monitoring.listen: "management" must be one of loopback, fabric'],
        ["a port another container holds", { ...MON, port: 8001 }, "monitoring.port: port 8001 clashes with serve.port on host spark-1"],
        [
            "the node exporter on Ray's GCS port",
            { ...MON, nodeExporterPort: 6379 },
            "monitoring.nodeExporterPort: port 6379 clashes with ray.gcsPort on host spark-1",
        ],
        ["a retention that is no duration", { ...MON, retention: "15 days" }, "monitoring.retention"],
        ["an image reference with a space", { ...MON, image: "prom/prometheus latest" }, "monitoring.image"],
        ["no image", { port: 9091 }, "monitoring.image: is required"],
        ["an unknown key", { ...MON, alertmanager: true }, "monitoring.alertmanager: unknown key"],
    ])("refused, naming the key: %s", (_, m, message) => {
        const found = problems(withMonitoring("spark", m));
        expect(found).toEqual(expect.arrayContaining([expect.stringContaining(message)]));
    });
});

describe("Prometheus's files", () => {
    const local = (): ClusterConfig => validateConfig(loadStackRaw("local"));

    test("scrape config: vLLM over TLS with the stack's certificate, Ray and the node exporters on the fabric, itself", () => {
        const cfg = local();
        const text = prometheusConfig(cfg, cfg.monitoring!);
        const conf = JSON.parse(text) as Raw; // JSON is YAML: what Prometheus reads
        expect(conf.global).toEqual({ scrape_interval: "5s", evaluation_interval: "5s" });
        const jobs = Object.fromEntries((conf.scrape_configs as Raw[]).map((j) => [j.job_name, j]));
        expect(Object.keys(jobs)).toEqual(["vllm", "ray", "node", "prometheus"]);
        expect(jobs.vllm).toEqual({
            job_name: "vllm",
            scheme: "https",
            tls_config: { ca_file: PROMETHEUS_TLS_CA, server_name: "10.231.0.11" },
            static_configs: [{ targets: ["127.0.0.1:8000"], labels: { node: "spark-1" } }],
        });
        expect(jobs.ray.static_configs).toEqual([
            { targets: [`10.232.0.11:${cfg.ray.metricsExportPort}`], labels: { node: "spark-1" } },
            { targets: [`10.232.0.12:${cfg.ray.metricsExportPort}`], labels: { node: "spark-2" } },
        ]);
        expect(jobs.node.static_configs).toEqual([
            { targets: ["10.232.0.11:9100"], labels: { node: "spark-1" } },
            { targets: ["10.232.0.12:9100"], labels: { node: "spark-2" } },
        ]);
        expect(jobs.prometheus.static_configs[0].targets).toEqual(["127.0.0.1:9090"]);
    });

    test("backend native: no Ray job; plain HTTP without serve.tls; listen fabric puts Prometheus on the head's fabric IP", () => {
        const raw = withMonitoring("local-native", { ...MON, listen: "fabric" }, (r) => delete r.serve.tls);
        const cfg = validateConfig(raw);
        const conf = JSON.parse(prometheusConfig(cfg, cfg.monitoring!)) as Raw;
        expect((conf.scrape_configs as Raw[]).map((j) => j.job_name)).toEqual(["vllm", "node", "prometheus"]);
        expect(conf.scrape_configs[0].scheme).toBe("http");
        expect(conf.scrape_configs[0].tls_config).toBeUndefined();
        expect(conf.scrape_configs[2].static_configs[0].targets).toEqual([`${cfg.head.fabricIp}:9090`]);
        expect(prometheusHint(cfg.monitoring!, cfg.head, { ...cfg.ssh, privateKeyPath: "/keys/o'brien key" })).toBe(
            `ssh -N -L 9090:${cfg.head.fabricIp}:9090 -i '/keys/o'\\''brien key' -o UserKnownHostsFile=${cfg.ssh.knownHostsFile} -p 22 ` +
                `root@${cfg.head.sshHost}, then open http://127.0.0.1:9090`,
        );
    });

    test("rules: each host's memory floor and each budgeted container's most starts, as constant series", () => {
        const raw = deepClone(loadStackRaw("local")) as Raw;
        raw.memoryGuard = { minAvailable: "2g" };
        raw.ray.maxRestarts = 5;
        const cfg = validateConfig(raw);
        const rules = (JSON.parse(prometheusRules(cfg, "vllm")) as Raw).groups[0].rules as Raw[];
        expect(rules).toEqual([
            { record: "vllm_cluster_memory_floor_bytes", expr: `vector(${2 * 1024 ** 3})`, labels: { node: "spark-1" } },
            { record: "vllm_cluster_container_max_starts", expr: "vector(6)", labels: { node: "spark-1", container: "vllm-ray-head" } },
            { record: "vllm_cluster_container_max_starts", expr: "vector(4)", labels: { node: "spark-1", container: "vllm-serve" } },
            { record: "vllm_cluster_memory_floor_bytes", expr: `vector(${2 * 1024 ** 3})`, labels: { node: "spark-2" } },
            { record: "vllm_cluster_container_max_starts", expr: "vector(6)", labels: { node: "spark-2", container: "vllm-ray-worker" } },
        ]);
    });
});

describe("the monitoring containers as the program registers them (spark stack, registry images)", () => {
    test("Prometheus on the head's loopback, as nobody, its files and the stack's certificate uploaded, no host path", async () => {
        const raw = withMonitoring("spark");
        const cfg = validateConfig(raw);
        const run = await runStack("spark", cfg);
        const prom = run.byName.get("monitoring-prometheus")!;
        expect(prom.provider).toBe(`${cfg.head.name}-docker`);
        expect(prom.inputs).toMatchObject({
            name: "vllm-prometheus",
            networkMode: "host",
            entrypoints: ["/bin/prometheus"],
            user: "65534:65534",
            restart: "unless-stopped",
            memory: 1024,
            // no swap beyond the ceiling: unset, Docker doubles it and the provider sees a change on every up
            memorySwap: 1024,
        });
        expect(prom.inputs.command).toContain("--web.listen-address=127.0.0.1:9090");
        expect(prom.inputs.command).toContain("--storage.tsdb.retention.time=15d");
        const uploads = prom.inputs.uploads as Raw[];
        expect(uploads.map((u) => u.file)).toEqual(["/etc/vllm-cluster/prometheus.yml", "/etc/vllm-cluster/rules.yml", PROMETHEUS_TLS_CA]);
        // the certificate it trusts is the stack's (public, uploaded): no host path is mounted at all
        expect(uploads[2].content).toBe(TEST_TLS.cert);
        expect(prom.inputs.mounts).toBeUndefined();
        // its image: the configured reference, pulled on each host by the monitoring's own distribution
        expect(prom.inputs.image).toBe((run.byName.get(`monitoring-image-${cfg.head.name}`)!.outputs.image as string).split(" ")[0]);
    });

    test("a node exporter on every host, on its fabric IP, reading only the node's crash budget files", async () => {
        const cfg = validateConfig(withMonitoring("spark"));
        const run = await runStack("spark", cfg);
        for (const n of cfg.nodes) {
            const c = run.byName.get(`monitoring-node-exporter-${n.name}`)!;
            expect(c.provider).toBe(`${n.name}-docker`);
            expect(c.inputs.name).toBe("vllm-node-exporter");
            expect(c.inputs.command).toContain(`--web.listen-address=${n.fabricIp}:9100`);
            expect((c.inputs.entrypoints as string[]).slice(0, 2)).toEqual(["/bin/sh", "-c"]);
            const binds = (c.inputs.mounts as Raw[]).filter((m) => m.type === "bind");
            expect(binds).toEqual([
                { type: "bind", source: `${cfg.stateDir}/${n.name}/init`, target: NODE_EXPORTER_INIT_DIR, readOnly: true },
            ]);
            expect(c.inputs.image).toBe(
                (run.byName.get(`monitoring-image-node-exporter-${n.name}`)!.outputs.image as string).split(" ")[0],
            );
            const labels = Object.fromEntries((c.inputs.labels as Raw[]).map((l) => [l.label, l.value]));
            expect(labels["vllm-cluster.role"]).toBe("monitoring");
            expect(JSON.parse(labels["vllm-cluster.ports"])).toEqual({ "node-exporter": 9100 });
        }
    });

    test("the host's preflight checks the monitoring ports are free", async () => {
        const cfg = validateConfig(withMonitoring("spark"));
        const run = await runStack("spark", cfg);
        expect(run.byName.get(`${cfg.head.name}-preflight`)!.inputs.create).toMatch(/ports=[0-9,]*\b9090\b/);
        expect(run.byName.get(`${cfg.workers[0].name}-preflight`)!.inputs.create).toMatch(/ports=[0-9,]*\b9100\b/);
    });
});

describe("dashboards", () => {
    test("the committed files are what setup/dashboards.js renders, Grafana JSON with a Prometheus input", () => {
        for (const f of dashboardFiles()) {
            expect(fs.readFileSync(path.join(ROOT, f.path), "utf8")).toBe(f.text);
            const d = JSON.parse(f.text) as Raw;
            expect(d.__inputs[0]).toMatchObject({ name: "DS_PROMETHEUS", type: "datasource", pluginId: "prometheus" });
            for (const p of d.panels as Raw[]) {
                expect(p.datasource.uid).toBe("${DS_PROMETHEUS}");
                expect(p.targets.length).toBeGreaterThan(0);
            }
        }
    });

    test("they cover vLLM's throughput, latency and KV cache, the memory headroom and the crash budget", () => {
        const exprs = DASHBOARDS.flatMap((d) => d.panels.flatMap((p) => p.queries.map((q) => q.expr))).join("\n");
        for (const series of [
            "vllm:generation_tokens_total",
            "vllm:time_to_first_token_seconds_bucket",
            "vllm:kv_cache_usage_perc",
            "node_memory_MemAvailable_bytes",
            "vllm_cluster_memory_floor_bytes",
            "vllm_cluster_container_starts",
            "vllm_cluster_container_max_starts",
        ]) {
            expect(exprs).toContain(series);
        }
    });
});

describe("the node exporter's crash budget loop (its PID 1)", () => {
    test("writes each container's starts; a file whose name or content is not what the init writes is left out", async () => {
        const dir = fs.mkdtempSync(path.join(os.tmpdir(), "vcl-ne-"));
        const init = path.join(dir, "init");
        const out = path.join(dir, "textfile");
        fs.mkdirSync(init);
        fs.mkdirSync(out);
        fs.writeFileSync(path.join(dir, "node_exporter"), "#!/bin/sh\nsleep 2\n", { mode: 0o755 });
        fs.writeFileSync(path.join(init, "vllm-serve.starts"), "0123abcd 2\n");
        fs.writeFileSync(path.join(init, "vllm-ray-head.starts"), "0123abcd 0\n");
        // what a host that lies could leave there: a label break-out in the name, a second sample in the content
        fs.writeFileSync(path.join(init, 'x"} 1\nvllm_cluster_container_starts{container="y.starts'), "id 1\n");
        fs.writeFileSync(path.join(init, "vllm-ray-worker.starts"), "id 1\nvllm_cluster_evil 9\n");
        fs.writeFileSync(path.join(init, "spaced.starts"), "id 1 2\n");
        fs.writeFileSync(path.join(init, "empty.starts"), "");
        const script = NODE_EXPORTER_LOOP.replace("/bin/node_exporter", path.join(dir, "node_exporter"))
            .replace(NODE_EXPORTER_INIT_DIR, init)
            .replace(NODE_EXPORTER_TEXTFILE_DIR, out)
            .replace("sleep 15", "sleep 1");
        const r = spawnSync("sh", ["-c", script, "node-exporter"], { encoding: "utf8", timeout: 30_000 });
        expect(r.status).toBe(0);
        const lines = fs
            .readFileSync(path.join(out, "vllm_cluster.prom"), "utf8")
            .split("\n")
            .filter((l) => l && !l.startsWith("#"));
        expect(lines.sort()).toEqual(
            [
                'vllm_cluster_container_starts{container="vllm-ray-head"} 0',
                'vllm_cluster_container_starts{container="vllm-ray-worker"} 1',
                'vllm_cluster_container_starts{container="vllm-serve"} 2',
            ].sort(),
        );
    });
});

describe("monitoring.grafana (untested on the simulated hosts: registered as the program makes it)", () => {
    const GRAFANA = { image: `grafana/grafana@sha256:${"a".repeat(64)}` };

    test("its port is claimed on the head only, and refused where another container holds it, naming the key", () => {
        const cfg = validateConfig(withMonitoring("spark", { ...MON, grafana: GRAFANA }));
        expect(cfg.monitoring!.grafana).toEqual({ ...GRAFANA, listen: "loopback", port: 3000 });
        expect(nodeListenPorts(cfg, cfg.head)).toContain(3000);
        expect(nodeListenPorts(cfg, cfg.workers[0])).not.toContain(3000);
        expect(problems(withMonitoring("spark", { ...MON, grafana: { ...GRAFANA, port: 9090 } }))).toEqual([
            "monitoring.grafana.port: port 9090 clashes with monitoring.port on host spark-1",
        ]);
        expect(problems(withMonitoring("spark", { ...MON, grafana: { ...GRAFANA, listen: "0.0.0.0" } }))).toEqual([
            'monitoring.grafana.listen: "0.0.0.0" must be one of loopback, fabric',
        ]);
    });

    test("Grafana on the head: the password from a file, never in its environment; Prometheus its data source; the dashboards provisioned", async () => {
        const cfg = validateConfig(withMonitoring("spark", { ...MON, grafana: GRAFANA }));
        const run = await runStack("spark", cfg);
        const g = run.byName.get("monitoring-grafana")!;
        expect(g.provider).toBe(`${cfg.head.name}-docker`);
        expect(g.inputs.name).toBe("vllm-grafana");
        const envs = g.inputs.envs as string[];
        expect(envs).toEqual(
            expect.arrayContaining(["GF_SERVER_HTTP_ADDR=127.0.0.1", "GF_SERVER_HTTP_PORT=3000", "GF_AUTH_ANONYMOUS_ENABLED=false"]),
        );
        expect(envs).toContain(`GF_SECURITY_ADMIN_PASSWORD__FILE=${GRAFANA_PASSWORD_FILE}`);
        expect(envs.some((e) => e.startsWith("GF_SECURITY_ADMIN_PASSWORD="))).toBe(false);
        // the uploads hold the password: the engine gets them as a secret (wire form: the signature and the value)
        const wire = g.inputs.uploads as { [k: string]: unknown; value: { file: string; content: string }[] };
        expect(wire[pulumi.runtime.specialSigKey]).toBe(pulumi.runtime.specialSecretSig);
        const byFile = Object.fromEntries(wire.value.map((u) => [u.file, u.content]));
        const ds = JSON.parse(byFile[`${GRAFANA_PROVISIONING}/datasources/vllm-cluster.yaml`] as string) as Raw;
        expect(ds.datasources).toEqual([
            expect.objectContaining({ uid: GRAFANA_DATASOURCE_UID, type: "prometheus", url: "http://127.0.0.1:9090" }),
        ]);
        const board = byFile[`${GRAFANA_DASHBOARDS}/vllm-cluster.json`] as string;
        expect(board).not.toContain("DS_PROMETHEUS");
        expect((JSON.parse(board) as Raw).panels.every((p: Raw) => p.datasource.uid === GRAFANA_DATASOURCE_UID)).toBe(true);
        // the password: generated, and secret wherever it goes (the upload's content, the stack output)
        const password = run.byName.get("monitoring-grafana-admin")!;
        expect(password.type).toBe("random:index/randomPassword:RandomPassword");
        expect(password.outputs.result).toEqual(expect.stringMatching(/^\w{16,}$/));
        expect(byFile[GRAFANA_PASSWORD_FILE]).toBe(password.outputs.result);
        expect(run.byName.get("monitoring-grafana-image-spark-1")).toBeDefined();
        expect(run.byName.get("monitoring-grafana-image-spark-2")).toBeUndefined();
    });

    test("the stack output says how to reach both through ssh tunnels", () => {
        const cfg = validateConfig(withMonitoring("spark", { ...MON, grafana: { ...GRAFANA, listen: "fabric" } }));
        const hint = prometheusHint(cfg.monitoring!, cfg.head, cfg.ssh);
        expect(hint).toMatch(/^Prometheus: ssh -N -L 9090:127\.0\.0\.1:9090 /);
        expect(hint).toContain(`Grafana: ssh -N -L 3000:${cfg.head.fabricIp}:3000 `);
        expect(hint).toContain("pulumi stack output grafanaAdminPassword --show-secrets");
    });
});

import * as pulumi from "@pulumi/pulumi";
import * as vm from "vm";
import { parseReport } from "../../components/clusterReady";
import { parseFacts } from "../../components/sparkNode";
import { ClusterConfig, validateConfig } from "../../infra/config";
import { apiKeyHash, secretHash } from "../../infra/builders/key";
import { shellQuote } from "../../infra/builders/quote";
import { scriptFile, shippedScriptArgv } from "../../infra/builders/remoteStep";
import { derivedCeilingMb } from "../../infra/builders/containerInit";

/** How a remote step's recorded command carries one argument: a line of its own. */
const arg = (a: string) => `vcl_args="$vcl_args "${shellQuote(shellQuote(a))}`;
import { SERVE_ENTRYPOINT, joinFingerprint } from "../../infra/builders/vllm";
import { hostCheckProvider } from "../../infra/providers/hostCheck";
import { keyFileProvider } from "../../infra/providers/keyFile";
import { rosterProvider } from "../../infra/providers/roster";
import { serveArgsCheckProvider } from "../../infra/providers/serveArgsCheck";
import { imageChainProvider } from "../../infra/providers/imageChain";
import { imagePresenceProvider } from "../../infra/providers/imagePresence";
import { modelChainProvider } from "../../infra/providers/modelChain";
import {
    MOCK_API_KEY,
    MOCK_MEM_TOTAL_KIB,
    PropertyDependencies,
    TEST_TLS,
    Rec,
    Run,
    deepClone,
    dependenciesByValue,
    diffRuns,
    loadStackRaw,
    runStack,
    unknownInputs,
} from "./harness";

// Pulumi's wire sentinel for secret values, as the mocks get them.
const SECRET_SIG = pulumi.runtime.specialSigKey;
const SECRET_SIG_VALUE = pulumi.runtime.specialSecretSig;

const T = {
    node: "vllm-cluster:index:SparkNode",
    provider: "pulumi:providers:docker",
    command: "command:local:Command",
    image: "vllm-cluster:index:ImageDistribution",
    presence: "pulumi-nodejs:dynamic:Resource",
    dynamic: "pulumi-nodejs:dynamic:Resource",
    rayHead: "vllm-cluster:index:RayHead",
    rayWorker: "vllm-cluster:index:RayWorker",
    ready: "vllm-cluster:index:ClusterReady",
    serve: "vllm-cluster:index:ServeEndpoint",
    container: "docker:index/container:Container",
    volume: "docker:index/volume:Volume",
    monitoring: "vllm-cluster:index:Monitoring",
    password: "random:index/randomPassword:RandomPassword",
};

/** The containers that run the model (Ray and serve), not the monitoring ones. */
function modelContainers(run: Run): Rec[] {
    return run.resources.filter((x) => x.type === T.container && labelsOf(x)["vllm-cluster.role"] !== "monitoring");
}

function get(run: Run, name: string): Rec {
    const r = run.byName.get(name);
    if (!r) {
        throw new Error(`no resource ${name}; have ${[...run.byName.keys()].join(", ")}`);
    }
    return r;
}

function envOf(r: Rec): Record<string, string> {
    return Object.fromEntries((r.inputs.envs as string[]).map((e) => [e.slice(0, e.indexOf("=")), e.slice(e.indexOf("=") + 1)]));
}

/**
 * A container's Entrypoint split at its init (container_init.sh, PID 1): the init's `key=value` arguments and what
 * it runs after `--` (the container's own entrypoint).
 */
function initOf(r: Rec): { args: Record<string, string>; then: string[] } {
    const e = r.inputs.entrypoints as string[];
    expect(e.slice(0, 2)).toEqual(["/bin/sh", "-c"]);
    expect(e[3]).toBe("container_init");
    const end = e.indexOf("--");
    return { args: keyValues(e.slice(5, end)), then: e.slice(end + 1) };
}

/** KEY=VALUE arguments as an object. */
function keyValues(list: string[]): Record<string, string> {
    return Object.fromEntries(list.map((a) => [a.slice(0, a.indexOf("=")), a.slice(a.indexOf("=") + 1)]));
}

function labelsOf(r: Rec): Record<string, string> {
    return Object.fromEntries((r.inputs.labels as { label: string; value: string }[]).map((l) => [l.label, l.value]));
}

/** The mock image ID on a host (each host's is its own, so a container's image names the host it came from). */
function imageIdOn(run: Run, node: string): string {
    return get(run, `image-${node}`).outputs.imageId as string;
}

/** The secret API key as the engine gets it: sentinel-wrapped. */
const secretValue = (v: string) => ({ [SECRET_SIG]: SECRET_SIG_VALUE, value: v });

/** What a changed output of `upstream` (a replaced resource's new ID, a new image ID, a new key) changes downstream. */
async function changedBy(stack: string, cfg: ClusterConfig, base: Run, upstream: string): Promise<string[]> {
    return diffRuns(base, await runStack(stack, cfg, { name: upstream, outputs: "changed" })).changed;
}

/** The expected graph: [name, type, parent, provider] for every resource of a stack. */
function expectedGraph(cfg: ClusterConfig): [string, string, string, string][] {
    const rows: [string, string, string, string][] = [];
    for (const n of cfg.nodes) {
        rows.push([n.name, T.node, "", ""], [`${n.name}-docker`, T.provider, n.name, ""], [`${n.name}-preflight`, T.command, n.name, ""]);
        rows.push([`image-${n.name}`, T.presence, "image", ""]);
        // the Ray head and each worker own their host's token file
        const rayOwner = n.name === cfg.head.name ? "ray-head" : `ray-worker-${n.name}`;
        if (cfg.ray.auth === "token") rows.push([`${n.name}-ray-token-file`, T.dynamic, rayOwner, ""]);
    }
    rows.push(["image", T.image, "", ""]);
    if (cfg.image.distribution === "chain" && cfg.image.source !== "registry" && cfg.nodes.length > 1) {
        rows.push(["image-chain", T.presence, "image", ""]);
    }
    if (cfg.ray.auth === "token") rows.push(["ray-token", T.password, "ray-head", ""]);
    rows.push(["ray-head", T.rayHead, "", ""], ["ray-head-container", T.container, "ray-head", `${cfg.head.name}-docker`]);
    for (const w of cfg.workers) {
        rows.push(
            [`ray-worker-${w.name}`, T.rayWorker, "", ""],
            [`ray-worker-${w.name}-container`, T.container, `ray-worker-${w.name}`, `${w.name}-docker`],
        );
    }
    rows.push(["cluster-ready", T.ready, "ray-head", ""], ["cluster-ready-probe", T.dynamic, "cluster-ready", ""]);
    rows.push(["api-key", T.password, "serve", ""], ["roster", T.dynamic, "", ""]);
    rows.push(
        ["serve", T.serve, "", ""],
        ["serve-api-key-file", T.dynamic, "serve", ""],
        ["serve-args-check", T.dynamic, "serve", ""],
        ["serve-container", T.container, "serve", `${cfg.head.name}-docker`],
        ["serve-readiness", T.dynamic, "serve", ""],
    );
    if (cfg.serve.tls) rows.push(["serve-tls-cert-file", T.dynamic, "serve", ""], ["serve-tls-key-file", T.dynamic, "serve", ""]);
    if (cfg.monitoring) {
        // its own image distribution (one reference here), a node exporter per host, Prometheus and its volume on the head
        rows.push(["monitoring", T.monitoring, "", ""], ["monitoring-image", T.image, "monitoring", ""]);
        if (cfg.image.distribution === "chain" && cfg.monitoring.source !== "registry" && cfg.nodes.length > 1) {
            rows.push(["monitoring-image-chain", T.presence, "monitoring-image", ""]);
        }
        for (const n of cfg.nodes) {
            rows.push(
                [`monitoring-image-${n.name}`, T.presence, "monitoring-image", ""],
                [`monitoring-node-exporter-${n.name}`, T.container, "monitoring", `${n.name}-docker`],
            );
        }
        rows.push(
            ["monitoring-prometheus", T.container, "monitoring", `${cfg.head.name}-docker`],
            ["monitoring-prometheus-data", T.volume, "monitoring", `${cfg.head.name}-docker`],
        );
    }
    return rows.sort((a, b) => a[0].localeCompare(b[0]));
}

/**
 * Each host's preflight checks exactly the host ports its containers say they listen on (their
 * `vllm-cluster.ports` labels), and a host whose containers listen on none gets no port check.
 */
function expectPreflightPortsMatchLabels(run: Run, cfg: ClusterConfig): void {
    for (const n of cfg.nodes) {
        const labelled = run.resources
            .filter((r) => r.type === T.container && r.provider === `${n.name}-docker`)
            .flatMap((r) => Object.values(JSON.parse(labelsOf(r)["vllm-cluster.ports"]) as Record<string, number>));
        const ports = [...new Set(labelled)].sort((a, b) => a - b);
        const create = get(run, `${n.name}-preflight`).inputs.create as string;
        expect(create).toContain("vcl_script=infra/scripts/preflight.sh");
        if (ports.length === 0) {
            expect(create).not.toContain('"ports=');
        } else {
            expect(create).toContain(`${arg(`ports=${ports.join(",")}`)}\n${arg("managed-label=vllm-cluster.managed")}\n`);
        }
    }
}

type Raw = Record<string, any>; // eslint-disable-line @typescript-eslint/no-explicit-any

const runs: Record<string, Run> = {};
const configs: Record<string, ClusterConfig> = {};

beforeAll(async () => {
    for (const stack of ["local", "spark", "four-node"]) {
        configs[stack] = validateConfig(loadStackRaw(stack));
        runs[stack] = await runStack(stack, configs[stack]);
    }
}, 120000);

describe.each(["local", "spark", "four-node"])("%s stack: resource graph", (stack) => {
    test("names, types, parents, providers and counts", () => {
        const got = runs[stack].resources.map((r) => [r.name, r.type, r.parent, r.provider]);
        expect(got).toEqual(expectedGraph(configs[stack]));
        const containers = runs[stack].resources.filter((r) => r.type === T.container);
        const monitoring = configs[stack].monitoring ? configs[stack].nodes.length + 1 : 0;
        expect(containers).toHaveLength(configs[stack].nodes.length + 1 + monitoring);
    });

    test("containers: fixed names, host network and IPC, explicit entrypoint, bounded restarts, deleteBeforeReplace", () => {
        for (const r of modelContainers(runs[stack])) {
            expect(["vllm-ray-head", "vllm-ray-worker", "vllm-serve"]).toContain(r.inputs.name);
            expect(r.inputs).toMatchObject({
                networkMode: "host",
                ipcMode: "host",
                restart: "on-failure",
                mustRun: true,
            });
            // Docker's own count starts again at 0 whenever the engine restarts: the init keeps the bound instead
            expect(r.inputs.maxRetryCount).toBeUndefined();
            const init = initOf(r);
            expect(init.args).toMatchObject({
                name: r.inputs.name,
                node: labelsOf(r)["vllm-cluster.node"],
                "state-dir": "/var/lib/vllm-cluster-init",
                "max-starts": String(configs[stack].serve.maxRestarts + 1),
            });
            expect(init.then.length).toBeGreaterThan(0);
            // the init directory, read-write, a bind whose missing source fails creation (preflight makes it)
            expect(r.inputs.mounts).toContainEqual({
                type: "bind",
                source: `${configs[stack].stateDir}/${labelsOf(r)["vllm-cluster.node"]}/init`,
                target: "/var/lib/vllm-cluster-init",
                readOnly: false,
            });
            expect(r.deleteBeforeReplace).toBe(true);
            // a container found stopped by refresh is replaced (new ID) rather than started again in place
            expect(r.replaceOnChanges).toEqual(["mustRun"]);
            const labels = labelsOf(r);
            expect(labels["vllm-cluster.managed"]).toBe("true");
            expect(labels["vllm-cluster.stack"]).toBe(stack);
            expect(labels["vllm-cluster.image-ref"]).toBe(configs[stack].image.ref);
        }
    });

    test("preflight checks the host ports each node's containers label (head: serve + Ray; workers: none)", () => {
        expectPreflightPortsMatchLabels(runs[stack], configs[stack]);
        const head = get(runs[stack], `${configs[stack].head.name}-preflight`).inputs.create as string;
        const r = configs[stack].ray;
        for (const port of [configs[stack].serve.port, r.gcsPort, r.dashboardPort, r.clientPort]) {
            expect(head).toMatch(new RegExp(`"ports=[0-9,]*\\b${port}\\b`));
        }
    });

    test("dependencies are data: each wire carries its source's mock output", () => {
        const run = runs[stack];
        const cfg = configs[stack];
        expect(new Set(cfg.nodes.map((n) => imageIdOn(run, n.name))).size).toBe(cfg.nodes.length);
        const head = get(run, "ray-head-container");
        expect(head.inputs.image).toBe(imageIdOn(run, cfg.head.name));
        expect(head.inputs.image).toMatch(/^sha256:/);
        for (const w of cfg.workers) {
            const c = get(run, `ray-worker-${w.name}-container`);
            expect(c.inputs.image).toBe(imageIdOn(run, w.name));
            expect(labelsOf(c)["vllm-cluster.head-container-id"]).toBe(head.id);
            expect(c.inputs.command).toContain(`--address=${cfg.head.fabricIp}:${cfg.ray.gcsPort}`);
            // every other host's copy expects the source host's image (its facts line: ID, store and content)
            expect(get(run, `image-${w.name}`).inputs.expectedImage).toBe(get(run, `image-${cfg.image.sourceNode!}`).outputs.image);
            expect(get(run, `image-${w.name}`).inputs.expectedImage).toMatch(/^sha256:\w+ classic sha256:/);
        }
        for (const n of cfg.nodes) {
            const facts = parseFacts(n.name, get(run, `${n.name}-preflight`).outputs.stdout as string);
            expect(get(run, `image-${n.name}`).inputs.hostArch).toBe(facts.arch);
        }
        const probe = get(run, "cluster-ready-probe");
        const roster = cfg.nodes
            .map((n) => n.name)
            .sort()
            .join(",");
        expect(probe.inputs.triggers).toEqual([head.id, ...cfg.workers.map((w) => get(run, `ray-worker-${w.name}-container`).id), roster]);
        expect(get(run, "roster").inputs.members).toEqual(
            cfg.nodes.map((n) => ({ name: n.name, evictScript: expect.stringContaining(`${arg(`stack=${stack}`)}\n`) })),
        );
        const serve = get(run, "serve-container");
        // the key reaches the server as data: its hash in a label, so a new key replaces the server
        expect(serve.inputs.image).toBe(imageIdOn(run, cfg.head.name));
        expect(serve.dependsOn).toContain("serve-api-key-file");
        // the Ray containers' IDs and the roster, once the probe passed: not Ray's node IDs, which a reboot renews
        expect(parseReport(probe.outputs.result as string).fingerprint).not.toBe("");
        const fingerprint = joinFingerprint([head.id, ...cfg.workers.map((w) => get(run, `ray-worker-${w.name}-container`).id), roster]);
        expect(labelsOf(serve)["vllm-cluster.cluster-fingerprint"]).toBe(fingerprint);
        expect(run.resolved.clusterFingerprint).toBe(fingerprint);
        expect(labelsOf(serve)["vllm-cluster.api-key-sha256"]).toBe(apiKeyHash(MOCK_API_KEY));
        expect(get(run, "serve-readiness").inputs.triggers).toEqual([serve.id]);
        expect(get(run, "serve-api-key-file").inputs.key).toEqual(secretValue(MOCK_API_KEY));
        // serve.tls: the certificate and its key installed next to the key file, mounted read-only, served by vLLM
        expect(cfg.serve.tls).toBeDefined();
        expect(serve.dependsOn).toEqual(expect.arrayContaining(["serve-tls-cert-file", "serve-tls-key-file"]));
        expect(get(run, "serve-tls-key-file").inputs.key).toEqual(secretValue(TEST_TLS.key));
        expect(get(run, "serve-tls-cert-file").inputs.key).toEqual(secretValue(TEST_TLS.cert));
        const tlsHash = secretHash("tls certificate", TEST_TLS.cert) + secretHash("tls key", TEST_TLS.key);
        expect(labelsOf(serve)["vllm-cluster.tls-sha256"]).toBe(tlsHash);
        expect(JSON.stringify(serve.inputs)).not.toContain("MIIE-test-tls-key");
        const state = `${cfg.stateDir}/${cfg.head.name}`;
        expect(serve.inputs.mounts).toEqual(
            expect.arrayContaining([
                { type: "bind", source: `${state}/tls-cert.pem`, target: "/run/vllm-cluster/tls-cert.pem", readOnly: true },
                { type: "bind", source: `${state}/tls-key.pem`, target: "/run/vllm-cluster/tls-key.pem", readOnly: true },
            ]),
        );
        const cmd = serve.inputs.command as string[];
        expect(cmd.slice(cmd.indexOf("--ssl-certfile"), cmd.indexOf("--ssl-certfile") + 4)).toEqual([
            "--ssl-certfile",
            "/run/vllm-cluster/tls-cert.pem",
            "--ssl-keyfile",
            "/run/vllm-cluster/tls-key.pem",
        ]);
        expect(run.resolved.endpoint).toBe(`https://${cfg.head.sshHost}:${cfg.serve.port}/v1`);
        expect(get(run, "serve-readiness").inputs.waitScript).toContain(`${arg(`port=${cfg.serve.port}`)}\n`);
        expect(get(run, "serve-readiness").inputs.waitScript).toContain(`${arg("tls=yes")}\n`);
    });

    test("the source host's image check (and so the Ray head) does not wait for the chain; every other host's does", () => {
        const run = runs[stack];
        const cfg = configs[stack];
        const source = cfg.image.sourceNode!;
        expect(cfg.image.source).toBe("host");
        expect(get(run, `image-${source}`).dependsOn).not.toContain("image-chain");
        for (const n of cfg.nodes.filter((x) => x.name !== source)) {
            expect(get(run, `image-${n.name}`).dependsOn).toContain("image-chain");
        }
    });

    test("no image is copied or checked before every host's preflight has passed", () => {
        const run = runs[stack];
        const cfg = configs[stack];
        const preflights = cfg.nodes.map((n) => `${n.name}-preflight`).sort();
        for (const name of ["image-chain", ...cfg.nodes.map((n) => `image-${n.name}`)]) {
            expect(get(run, name).dependsOn).toEqual(expect.arrayContaining(preflights));
        }
    });

    test("nothing runs on a host before its preflight: every container and every key or token file waits for it, said as data", () => {
        const run = runs[stack];
        const cfg = configs[stack];
        const onHost = (r: (typeof run.resources)[number]): string | undefined =>
            r.type === T.container
                ? r.provider.replace(/-docker$/, "")
                : r.name.endsWith("-file")
                  ? (cfg.nodes.find((n) => r.name.startsWith(`${n.name}-`))?.name ?? cfg.head.name)
                  : undefined;
        const checked = run.resources.filter((r) => onHost(r) !== undefined);
        expect(checked.map((r) => r.name)).toEqual(expect.arrayContaining(["ray-head-container", "serve-container", "serve-api-key-file"]));
        for (const r of checked) {
            expect([r.name, r.dependsOn]).toEqual([r.name, expect.arrayContaining([`${onHost(r)}-preflight`])]);
        }
    });

    test("dependencies are data: while the head container is being created (a preview), what is made from it is unknown", async () => {
        const cfg = configs[stack];
        const preview = await runStack(stack, cfg, { name: "ray-head-container", outputs: "unknown" });
        expect(unknownInputs(preview)).toEqual({
            // a worker's init waits for the head's address, and serve's for the Ray cluster at the head's address
            ...Object.fromEntries(cfg.workers.map((w) => [`ray-worker-${w.name}-container`, ["command", "entrypoints", "labels"]])),
            "cluster-ready-probe": ["checkScript", "triggers", "waitScript"],
            // and its cluster fingerprint: of the Ray containers' IDs
            "serve-container": ["entrypoints", "envs", "labels"],
        });
    });

    test("serve labels carry the parallelism and the key file path", () => {
        const cfg = configs[stack];
        expect(labelsOf(get(runs[stack], "serve-container"))).toMatchObject({
            "vllm-cluster.role": "serve",
            "vllm-cluster.ports": JSON.stringify({ serve: cfg.serve.port }),
            "vllm-cluster.tensor-parallel-size": String(cfg.serve.tensorParallelSize),
            "vllm-cluster.pipeline-parallel-size": String(cfg.serve.pipelineParallelSize),
            "vllm-cluster.cluster-gpus": String(cfg.totalGpus),
            "vllm-cluster.api-key-file": "/run/vllm-cluster/api-key",
        });
    });

    test("the API key never appears in a command, env, label or non-secret output", () => {
        const run = runs[stack];
        expect(run.resolved.apiKey).toBe(MOCK_API_KEY);
        expect(run.resolved.apiKeyIsSecret).toBe(true);
        for (const r of run.resources) {
            const inputs = { ...r.inputs };
            if (r.name === "serve-api-key-file") {
                // the only place the key travels: the key file's input (ssh stdin on the host), as a secret value
                expect(inputs.key).toEqual({ [SECRET_SIG]: SECRET_SIG_VALUE, value: MOCK_API_KEY });
                expect(r.additionalSecretOutputs).toContain("key");
                delete inputs.key;
            }
            expect(JSON.stringify(inputs)).not.toContain(MOCK_API_KEY);
        }
        const { endpoint, clusterFingerprint } = run.resolved;
        const plain = JSON.stringify([
            endpoint,
            clusterFingerprint,
            run.outputs.rayDashboard,
            run.outputs.nodes,
            run.outputs.servedModelName,
        ]);
        expect(plain).not.toContain(MOCK_API_KEY);
    });

    test("outputs", () => {
        const cfg = configs[stack];
        const run = runs[stack];
        expect(run.resolved.endpoint).toBe(`https://${cfg.head.sshHost}:${cfg.serve.port}/v1`);
        expect(run.outputs.servedModelName).toBe(cfg.model.servedName);
        expect(run.outputs.rayDashboard).toBe(`ssh -L 8265:127.0.0.1:8265 ${cfg.head.sshUser}@${cfg.head.sshHost}`);
        expect(run.outputs.nodes.map((n) => n.name)).toEqual(cfg.nodes.map((n) => n.name));
    });
});

describe("spark stack carries the seeds' working settings and fixes", () => {
    const run = () => runs.spark;

    test("serve command line", () => {
        const serve = get(run(), "serve-container");
        const cmd = serve.inputs.command as string[];
        expect(cmd).toMatchSnapshot();
        expect(cmd.slice(0, 3)).toEqual(["vllm", "serve", "/models/Qwen3.5-122B-A10B-FP8"]);
        const flag = (f: string) => {
            expect(cmd).toContain(f);
            return cmd[cmd.indexOf(f) + 1];
        };
        expect(flag("--distributed-executor-backend")).toBe("ray");
        expect(flag("--tensor-parallel-size")).toBe("2");
        expect(flag("--pipeline-parallel-size")).toBe("1");
        expect(flag("--port")).toBe("8001");
        expect(flag("--host")).toBe("0.0.0.0");
        expect(flag("--gpu-memory-utilization")).toBe("0.9");
        expect(flag("--max-model-len")).toBe("32768");
        expect(flag("--reasoning-parser")).toBe("qwen3");
        expect(flag("--tool-call-parser")).toBe("qwen3_coder");
        expect(flag("--served-model-name")).toBe("qwen3.5-122b-a10b-fp8");
        expect(cmd).toContain("--enable-auto-tool-choice");
        expect(cmd).toContain("--trust-remote-code");
        expect(cmd).not.toContain("--api-key");
        // the server's own entrypoint, behind the watchdog's (serve.watchdog: see "container init" below)
        const then = initOf(serve).then;
        expect(then.slice(then.indexOf("--") + 1)).toEqual(SERVE_ENTRYPOINT);
        expect(JSON.stringify(serve.inputs)).not.toContain(MOCK_API_KEY);
        expect(envOf(serve)).toEqual({
            VLLM_HOST_IP: "192.168.200.12",
            NCCL_SOCKET_IFNAME: "enp1s0f1np1",
            GLOO_SOCKET_IFNAME: "enp1s0f1np1",
            NCCL_IB_HCA: "rocep1s0f1,roceP2p1s0f1",
            RAY_memory_monitor_refresh_ms: "0",
            RAY_ADDRESS: "192.168.200.12:6379",
            // Ray token authentication: the token itself only in the read-only file
            RAY_AUTH_MODE: "token",
            RAY_AUTH_TOKEN_PATH: "/run/vllm-cluster/ray-token",
            // compile caches in the node's cache directory (mounted below), kept across container replacement
            VLLM_CACHE_ROOT: "/var/cache/vllm-cluster/vllm",
            TORCHINDUCTOR_CACHE_DIR: "/var/cache/vllm-cluster/torchinductor",
            TRITON_CACHE_DIR: "/var/cache/vllm-cluster/triton",
            CUDA_CACHE_PATH: "/var/cache/vllm-cluster/nv",
        });
        expect(serve.inputs.volumes).toEqual([
            {
                hostPath: "/home/aurora/models/Qwen3.5-122B-A10B-FP8",
                containerPath: "/models/Qwen3.5-122B-A10B-FP8",
                readOnly: true,
            },
            { hostPath: "/home/aurora/.local/state/vllm-cluster/spark-1/tmp", containerPath: "/tmp" },
            { hostPath: "/home/aurora/.local/state/vllm-cluster/spark-1/cache", containerPath: "/var/cache/vllm-cluster" },
        ]);
        // the key file is a bind mount that must exist: Docker refuses to create it (a volume would become a directory)
        expect(serve.inputs.mounts).toEqual([
            {
                type: "bind",
                source: "/home/aurora/.local/state/vllm-cluster/spark-1/api-key",
                target: "/run/vllm-cluster/api-key",
                readOnly: true,
            },
            {
                type: "bind",
                source: "/home/aurora/.local/state/vllm-cluster/spark-1/tls-cert.pem",
                target: "/run/vllm-cluster/tls-cert.pem",
                readOnly: true,
            },
            {
                type: "bind",
                source: "/home/aurora/.local/state/vllm-cluster/spark-1/tls-key.pem",
                target: "/run/vllm-cluster/tls-key.pem",
                readOnly: true,
            },
            {
                type: "bind",
                source: "/home/aurora/.local/state/vllm-cluster/spark-1/ray-token",
                target: "/run/vllm-cluster/ray-token",
                readOnly: true,
            },
            {
                type: "bind",
                source: "/home/aurora/.local/state/vllm-cluster/spark-1/init",
                target: "/var/lib/vllm-cluster-init",
                readOnly: false,
            },
        ]);
        expect(serve.inputs.gpus).toBe("all");
        expect(serve.inputs.shmSize).toBe(65536);
    });

    test("memory guard on the GB10s (unified memory): each container's ceiling is the host's memory less 8 GiB, the floor 4 GiB", () => {
        const mib = Math.floor((MOCK_MEM_TOTAL_KIB * 1024 - 8 * 1024 ** 3) / 1024 ** 2);
        for (const name of ["ray-head-container", "ray-worker-spark-2-container", "serve-container"]) {
            const r = get(run(), name);
            expect([name, r.inputs.memory]).toEqual([name, mib]);
            expect(initOf(r).args).toMatchObject({
                "min-available-kib": String(4 * 1024 ** 2),
                "check-seconds": "1",
                ceiling: `${mib}MiB`,
            });
        }
        // serve waits, after a reboot too, until Ray sees every host on its fabric IP: the gate's own probe, looking once
        const serveInit = initOf(get(run(), "serve-container")).args;
        expect(JSON.parse(serveInit["wait-arg"])).toEqual({
            address: "192.168.200.12:6379",
            nodes: [
                { name: "spark-1", fabricIp: "192.168.200.12", sshHost: "10.1.230.180" },
                { name: "spark-2", fabricIp: "192.168.200.13", sshHost: "10.1.230.181" },
            ],
            gpus: 2,
            timeoutSeconds: 0,
        });
        expect(Buffer.from(serveInit["wait-python"], "base64").toString()).toBe(scriptFile("ray_cluster_probe.py").text);
        expect(serveInit["healthy-url"]).toBe("https://127.0.0.1:8001/health");
        // the watchdog (serve.watchdog defaults) in front of the server's own entrypoint: a completion over loopback
        // with the key file mounted in the container, its restarts bounded by serve.maxRestarts
        const then = initOf(get(run(), "serve-container")).then;
        expect(then.slice(0, 5)).toEqual(shippedScriptArgv("serve_watchdog.sh").slice(0, 5));
        const dog = keyValues(then.slice(5, then.indexOf("--")));
        expect(Buffer.from(dog.probe, "base64").toString()).toBe(scriptFile("serve_watchdog.py").text);
        expect(JSON.parse(dog["probe-arg"])).toEqual({
            url: "https://127.0.0.1:8001",
            keyFile: "/run/vllm-cluster/api-key",
            model: "qwen3.5-122b-a10b-fp8",
        });
        expect(dog).toMatchObject({ name: "vllm-serve", node: "spark-1", every: "30", timeout: "30", misses: "3", "max-restarts": "3" });
        expect(then.slice(then.indexOf("--") + 1)).toEqual(SERVE_ENTRYPOINT);
        // a worker waits for the head's GCS
        expect(initOf(get(run(), "ray-worker-spark-2-container")).args["wait-tcp"]).toBe("192.168.200.12:6379");
    });

    test("memory guard: memoryGuard.limit for every container, serve.memoryLimit for serve's own; a reserve larger than the host is named", async () => {
        const raw = deepClone(loadStackRaw("spark")) as Raw;
        raw.memoryGuard = { limit: "64g", minAvailable: "2g", checkSeconds: 5 };
        raw.serve.memoryLimit = "100g";
        const r = await runStack("spark", validateConfig(raw));
        expect(get(r, "ray-head-container").inputs.memory).toBe(64 * 1024);
        expect(get(r, "serve-container").inputs.memory).toBe(100 * 1024);
        expect(initOf(get(r, "ray-worker-spark-2-container")).args).toMatchObject({
            "min-available-kib": String(2 * 1024 ** 2),
            "check-seconds": "5",
        });
        // hosts with dedicated GPU memory (the local stack): neither unless set
        const local = get(runs.local, "ray-head-container");
        expect(local.inputs.memory).toBeUndefined();
        expect(initOf(local).args["min-available-kib"]).toBe("0");
        // the host's memory is known only once its preflight ran: the default ceiling is checked then
        expect(() => derivedCeilingMb("spark-1", 200 * 1024 ** 3, MOCK_MEM_TOTAL_KIB)).toThrow(
            "node spark-1: memoryGuard.reserve (204800 MiB) leaves no memory for the containers (the host has 122070 MiB); " +
                "set a smaller memoryGuard.reserve or memoryGuard.limit",
        );
    });

    test("ray head and worker containers", () => {
        const head = get(run(), "ray-head-container");
        const worker = get(run(), "ray-worker-spark-2-container");
        // the init's arguments, not its text: the snapshot is of what each container is told, the script is tested as a file
        const shown = (r: Rec) => [initOf(r).args, initOf(r).then, r.inputs.command];
        expect({ head: shown(head), worker: shown(worker) }).toMatchSnapshot();
        expect(initOf(head).then).toEqual(["/usr/bin/env"]);
        expect(head.inputs.command).toEqual(
            expect.arrayContaining([
                "ray",
                "start",
                "--head",
                "--block",
                "--node-ip-address=192.168.200.12",
                "--num-gpus=1",
                "--dashboard-host=127.0.0.1",
            ]),
        );
        expect(worker.inputs.command).toEqual(
            expect.arrayContaining([
                "ray",
                "start",
                "--block",
                "--address=192.168.200.12:6379",
                "--node-ip-address=192.168.200.13",
                "--num-gpus=1",
            ]),
        );
        expect(envOf(head).VLLM_HOST_IP).toBe("192.168.200.12");
        expect(envOf(worker).VLLM_HOST_IP).toBe("192.168.200.13");
        expect(envOf(worker).NCCL_SOCKET_IFNAME).toBe("enp1s0f1np1");
        expect(envOf(worker).NCCL_IB_HCA).toBe("rocep1s0f1,roceP2p1s0f1");
        for (const c of [head, worker]) {
            expect(c.inputs.volumes).toContainEqual({
                hostPath: "/home/aurora/models/Qwen3.5-122B-A10B-FP8",
                containerPath: "/models/Qwen3.5-122B-A10B-FP8",
                readOnly: true,
            });
            expect(c.inputs.gpus).toBe("all");
        }
        // each keeps its compile caches in its own host's cache directory, and Inductor's precompiled headers in
        // its host's /tmp: a replaced worker does not compile again
        expect(worker.inputs.volumes).toContainEqual({
            hostPath: "/home/aurora/.local/state/vllm-cluster/spark-2/tmp",
            containerPath: "/tmp",
        });
        expect(head.inputs.volumes).toContainEqual({
            hostPath: "/home/aurora/.local/state/vllm-cluster/spark-1/cache",
            containerPath: "/var/cache/vllm-cluster",
        });
        expect(worker.inputs.volumes).toContainEqual({
            hostPath: "/home/aurora/.local/state/vllm-cluster/spark-2/cache",
            containerPath: "/var/cache/vllm-cluster",
        });
        expect(envOf(worker).TORCHINDUCTOR_CACHE_DIR).toBe("/var/cache/vllm-cluster/torchinductor");
        expect(labelsOf(head)["vllm-cluster.dashboard-host"]).toBe("127.0.0.1");
        // every port a Ray node opens is pinned and claimed: preflight checks it free, the policy pack sees it
        const nodePorts =
            '"raylet":6380,"object-manager":6381,"runtime-env-agent":6382,"dashboard-agent-grpc":6383,"metrics":6384,"dashboard-agent":52365';
        const headOnly = '"gcs":6379,"dashboard":8265,"client":10001,"autoscaler-metrics":44217,"dashboard-metrics":44227';
        expect(labelsOf(head)["vllm-cluster.ports"]).toBe(`{${headOnly},${nodePorts}}`);
        expect(envOf(head)).toMatchObject({ AUTOSCALER_METRIC_PORT: "44217", DASHBOARD_METRIC_PORT: "44227" });
        expect(labelsOf(worker)["vllm-cluster.ports"]).toBe(`{${nodePorts}}`);
    });

    test("docker providers go over ssh:// with verified host keys", () => {
        const p = get(run(), "spark-2-docker");
        expect(p.inputs.host).toBe("ssh://aurora@10.1.230.181:22");
        expect(JSON.parse(p.inputs.sshOpts as string)).toEqual(
            expect.arrayContaining(["StrictHostKeyChecking=yes", "UserKnownHostsFile=~/.ssh/known_hosts"]),
        );
    });

    test("remote commands: preflight, probe, readiness", () => {
        const r = run();
        expect(get(r, "spark-1-preflight").inputs.create).toContain(`${arg("gpu-runtime=nvidia")}\n${arg("gpus=1")}\n`);
        const probe = get(r, "cluster-ready-probe").inputs;
        expect(probe.waitScript).toContain("docker exec vllm-ray-head python3 -c");
        // the refresh-time look is the same probe with no waiting
        expect(probe.checkScript).toBe((probe.waitScript as string).replace('"timeoutSeconds":300', '"timeoutSeconds":0'));
        const ready = get(r, "serve-readiness").inputs;
        expect(ready.waitScript).toContain(`vcl_sha256=${scriptFile("serve_readiness.bash").sha256}`);
        expect(ready.waitScript).toContain(`${arg("timeout=1800")}\n`);
        expect(ready.checkScript).toContain(`${arg("timeout=20")}\n`);
        const keyFile = get(r, "serve-api-key-file").inputs;
        expect(keyFile.removeScript).toContain(`${arg("remove")}\n${arg(`file=${configs.spark.stateDir}/spark-1/api-key`)}\n`);
        expect(keyFile.checkScript).toContain(
            `${arg("check")}\n${arg("kind=api key")}\n${arg(`file=${configs.spark.stateDir}/spark-1/api-key`)}\n`,
        );
        expect(keyFile.keyHash).toBe(apiKeyHash(MOCK_API_KEY));
    });
});

describe("local stack targets the simulated hosts", () => {
    test("no GPUs requested, NCCL IB disabled, testbed image from spark-1", () => {
        const r = runs.local;
        for (const c of r.resources.filter((x) => x.type === T.container)) expect(c.inputs.gpus).toBeUndefined();
        for (const c of modelContainers(r)) expect(envOf(c).NCCL_IB_DISABLE).toBe("1");
        expect(get(r, "image-spark-2").inputs.ensureScript).toContain("'docker save vllm-cluster-testbed:latest'");
        expect(get(r, "spark-1-docker").inputs.host).toBe("ssh://root@10.231.0.11:22");
        expect(get(r, "serve-container").inputs.command).toEqual(
            expect.arrayContaining(["--served-model-name", "tiny-qwen2", "--port", "8000"]),
        );
    });
});

describe("restart scope: exactly these resources see changed inputs", () => {
    async function scope(stack: string, mutate: (raw: Raw) => void) {
        const raw = deepClone(loadStackRaw(stack));
        mutate(raw);
        const next = await runStack(stack, validateConfig(raw));
        return diffRuns(runs[stack], next);
    }

    test("nothing changed: nothing changes", async () => {
        expect(await scope("spark", () => undefined)).toEqual({ added: [], removed: [], changed: [] });
    });

    test("serve argument: only serve is replaced (and re-checked); Ray containers keep their inputs", async () => {
        expect(await scope("spark", (r) => (r.serve.maxModelLen = 16384))).toEqual({
            added: [],
            removed: [],
            // the new command is checked by the image's own vLLM before serve is replaced
            changed: ["serve-args-check", "serve-container", "serve-readiness"],
        });
    });

    test("image: distribution updates, Ray containers are replaced, cluster re-checked, serve restarts", async () => {
        expect(await scope("spark", (r) => (r.image.ref = "hellohal2064/vllm-qwen3.5-gb10:v2"))).toEqual({
            added: [],
            removed: [],
            changed: [
                "cluster-ready-probe",
                "image-chain",
                "image-spark-1",
                "image-spark-2",
                "ray-head-container",
                "ray-worker-spark-2-container",
                "serve-args-check",
                "serve-container",
                "serve-readiness",
            ],
        });
    });

    test("head replaced (a Ray head setting): workers follow it, cluster re-checked, serve restarts", async () => {
        // a port setting also re-runs the head's preflight, which checks that the new port is free there
        expect(await scope("spark", (r) => (r.ray.dashboardPort = 8266))).toEqual({
            added: [],
            removed: [],
            changed: [
                "cluster-ready-probe",
                "ray-head-container",
                "ray-worker-spark-2-container",
                "serve-container",
                "serve-readiness",
                "spark-1-preflight",
            ],
        });
        // a setting that is no port leaves preflight alone
        expect((await scope("spark", (r) => (r.ray.objectStoreMemoryBytes = 2_000_000_000))).changed).not.toContain("spark-1-preflight");
    });

    test("added host: one new worker, cluster re-checked, serve restarts with the new parallelism", async () => {
        const d = await scope("local", (r) => {
            r.nodes.push({ ...r.nodes[1], name: "spark-3", sshHost: "10.231.0.13", fabricIp: "10.232.0.13" });
            r.serve.tensorParallelSize = 3;
        });
        expect(d).toEqual({
            added: [
                "image-spark-3",
                // monitoring: the host gets the monitoring image and a node exporter
                "monitoring-image-spark-3",
                "monitoring-node-exporter-spark-3",
                "ray-worker-spark-3",
                "ray-worker-spark-3-container",
                "spark-3",
                "spark-3-docker",
                "spark-3-preflight",
                "spark-3-ray-token-file",
            ],
            removed: [],
            // the roster records the new member: the gate re-runs after it
            // the chain gains a member (it copies to spark-3 only: the others hold the image), and the other hosts'
            // preflights re-run to check that they reach spark-3's sshd on the fabric
            changed: [
                "cluster-ready-probe",
                "image-chain",
                // Prometheus scrapes the new host (its config changes; the samples stay in its volume)
                "monitoring-image-chain",
                "monitoring-prometheus",
                "roster",
                "serve-args-check",
                "serve-container",
                "serve-readiness",
                "spark-1-preflight",
                "spark-2-preflight",
            ],
        });
    });
});

describe("spark stack: dependencies are data", () => {
    test("each input waits on exactly the resources it is made from (a preview creating one leaves those unknown)", async () => {
        const cfg = configs.spark;
        const deps = await dependenciesByValue("spark", cfg, runs.spark);
        expect(deps["ray-head-container"].image).toEqual([`image-${cfg.head.name}`]);
        for (const w of cfg.workers) {
            const c = deps[`ray-worker-${w.name}-container`];
            expect(c.image).toEqual([`image-${w.name}`]);
            expect(c.command).toEqual(["ray-head-container"]);
            // the head's ID, and the token file's hash (the file exists before the worker starts)
            expect(c.labels).toEqual(["ray-head-container", "ray-token", `${w.name}-ray-token-file`]);
            expect(deps[`image-${w.name}`].expectedImage).toEqual([`image-${cfg.image.sourceNode}`]);
        }
        for (const n of cfg.nodes) {
            expect(deps[`image-${n.name}`].hostArch).toEqual([`${n.name}-preflight`]);
        }
        expect(deps["cluster-ready-probe"].triggers).toEqual(
            ["ray-head-container", ...cfg.workers.map((w) => `ray-worker-${w.name}-container`), "roster"].sort(),
        );
        // the fingerprint: the probe passed, of the Ray containers' IDs and the roster
        expect(deps["serve-container"].labels).toEqual(
            [
                "api-key",
                "cluster-ready-probe",
                "ray-head-container",
                "ray-token",
                `${cfg.head.name}-ray-token-file`,
                ...cfg.workers.map((w) => `ray-worker-${w.name}-container`),
                "roster",
            ].sort(),
        );
        expect(deps["serve-container"].image).toEqual([`image-${cfg.head.name}`]);
        expect(deps["serve-readiness"].triggers).toEqual(["serve-container"]);
        expect(deps["serve-api-key-file"].key).toEqual(["api-key"]);
        expect(deps["serve-api-key-file"].keyHash).toEqual(["api-key"]);
    }, 60000);
});

describe("spark stack: a changed upstream output changes the inputs of exactly what it feeds (the engine replaces those)", () => {
    test.each([
        [
            "image-spark-1",
            [
                "cluster-ready-probe",
                "image-spark-2",
                "ray-head-container",
                "ray-worker-spark-2-container",
                "serve-args-check",
                "serve-container",
                "serve-readiness",
            ],
        ],
        ["image-spark-2", ["cluster-ready-probe", "ray-worker-spark-2-container", "serve-container", "serve-readiness"]],
        [
            "spark-2-preflight",
            ["cluster-ready-probe", "image-spark-2", "ray-worker-spark-2-container", "serve-container", "serve-readiness"],
        ],
        ["ray-head-container", ["cluster-ready-probe", "ray-worker-spark-2-container", "serve-container", "serve-readiness"]],
        ["ray-worker-spark-2-container", ["cluster-ready-probe", "serve-container", "serve-readiness"]],
        // a cluster that re-formed by itself (new Ray node IDs in the probe's report, as after a reboot) replaces nothing
        ["cluster-ready-probe", []],
        ["api-key", ["serve-api-key-file", "serve-container", "serve-readiness"]],
        ["serve-container", ["serve-readiness"]],
    ])("%s", async (upstream, changed) => {
        expect(await changedBy("spark", configs.spark, runs.spark, upstream)).toEqual(changed);
    });
});

describe("dynamic providers reach the engine serialized (real closure serialization, nothing mocked)", () => {
    test("each loads as a module whose provider diffs as the source does", async () => {
        const dynamic = runs.local.resources.filter((r) => r.type === T.dynamic);
        // per node: image presence and the Ray token file; the image chain, the gate, the key file, serve's arguments
        // check and readiness, and the two TLS files; monitoring's image presence per node and its chain
        expect(dynamic).toHaveLength(configs.local.nodes.length * 3 + 9);
        for (const r of dynamic) {
            const mod = { exports: {} as { handler?: () => pulumi.dynamic.ResourceProvider } };
            vm.runInNewContext(r.serializedProvider ?? "", { exports: mod.exports, require });
            const loaded = mod.exports.handler!();
            const argsCheck = "checkScript" in r.inputs && "command" in r.inputs;
            const source = argsCheck
                ? serveArgsCheckProvider
                : "waitScript" in r.inputs
                  ? hostCheckProvider
                  : "keyHash" in r.inputs
                    ? keyFileProvider
                    : "members" in r.inputs && "ref" in r.inputs
                      ? imageChainProvider
                      : "members" in r.inputs
                        ? rosterProvider
                        : imagePresenceProvider;
            expect(Object.keys(loaded).sort()).toEqual(Object.keys(source).sort());
            const news = {
                ...r.inputs,
                ref: "other:tag",
                triggers: ["other"],
                keyHash: "other",
                members: [{ name: "other", evictScript: "" }],
                ...(argsCheck ? { command: ["vllm", "serve", "/models/other"] } : {}),
            };
            const diff = await loaded.diff!(r.id, r.outputs, news);
            expect(diff.changes).toBe(true);
            expect(diff).toEqual(await source.diff!(r.id, r.outputs, news));
        }
    });
});

describe("model.source: the model copied along a chain from that node, its digest carried by every container", () => {
    const DIGEST = "vllm-cluster.model-sha256";
    const withSource = (stack: string, source: string): ClusterConfig => {
        const raw: Raw = deepClone(loadStackRaw(stack));
        raw.model.source = source;
        return validateConfig(raw);
    };
    const containersOf = (run: Run) => run.resources.filter((r) => r.type === T.container);

    test("unset: no model chain, and no container carries a model digest", () => {
        for (const stack of ["local", "spark", "four-node"]) {
            expect(runs[stack].byName.has("model-chain")).toBe(false);
            for (const c of containersOf(runs[stack])) expect(labelsOf(c)[DIGEST]).toBeUndefined();
        }
    });

    test("set: one chain from the source to the other nodes in stack order; every container takes its digest", async () => {
        const cfg = withSource("four-node", "gpu-2");
        const run = await runStack("four-node", cfg);
        const d = diffRuns(runs["four-node"], run);
        expect(d.added).toEqual(["model", "model-chain"]);
        expect(d.removed).toEqual([]);
        expect(d.changed).toEqual([...containersOf(run).map((c) => c.name), "cluster-ready-probe", "serve-readiness"].sort());
        expect(get(run, "model")).toMatchObject({ type: "vllm-cluster:index:ModelDistribution", parent: "" });
        const chain = get(run, "model-chain");
        expect(chain).toMatchObject({ type: T.dynamic, parent: "model", provider: "" });
        expect(chain.inputs).toMatchObject({
            hostPath: cfg.model.hostPath,
            source: { node: "gpu-2", target: { host: cfg.nodes[1].sshHost } },
        });
        expect((chain.inputs.members as { node: string }[]).map((m) => m.node)).toEqual(["gpu-1", "gpu-3", "gpu-4"]);
        expect(chain.outputs.digest).toMatch(/^sha256:/);
        expect(containersOf(run)).toHaveLength(cfg.nodes.length + 1);
        for (const c of containersOf(run)) expect(labelsOf(c)[DIGEST]).toBe(chain.outputs.digest);
    });

    test("serve waits on the chain through data, and new model content replaces what mounts the model", async () => {
        const cfg = withSource("local", "spark-1");
        const run = await runStack("local", cfg);
        // a preview creating the chain leaves the digest label of every container unknown until the copy is done
        const preview = await runStack("local", cfg, { name: "model-chain", outputs: "unknown" });
        expect(unknownInputs(preview)).toEqual({
            "ray-head-container": ["labels"],
            "ray-worker-spark-2-container": ["labels"],
            "serve-container": ["labels"],
        });
        expect(await changedBy("local", cfg, run, "model-chain")).toEqual([
            "cluster-ready-probe",
            "ray-head-container",
            "ray-worker-spark-2-container",
            "serve-container",
            "serve-readiness",
        ]);
    });

    test("backend native: every rank takes the digest", async () => {
        const run = await runStack("local-native", withSource("local-native", "spark-2"));
        const chain = get(run, "model-chain");
        // nothing is read or copied before every host's preflight has passed
        expect(chain.dependsOn).toEqual(expect.arrayContaining(["spark-1-preflight", "spark-2-preflight"]));
        expect((chain.inputs.members as { node: string }[]).map((m) => m.node)).toEqual(["spark-1"]);
        for (const r of ["serve-rank-0-container", "serve-rank-1-container"]) {
            expect(labelsOf(get(run, r))[DIGEST]).toBe(chain.outputs.digest);
        }
    });

    test("the chain's provider reaches the engine serialized and diffs as the source does", async () => {
        const chain = get(await runStack("local", withSource("local", "spark-1")), "model-chain");
        const mod = { exports: {} as { handler?: () => pulumi.dynamic.ResourceProvider } };
        vm.runInNewContext(chain.serializedProvider ?? "", { exports: mod.exports, require });
        const loaded = mod.exports.handler!();
        expect(Object.keys(loaded).sort()).toEqual(Object.keys(modelChainProvider).sort());
        for (const news of [chain.inputs, { ...chain.inputs, hostPath: "/models/other" }]) {
            const diff = await loaded.diff!(chain.id, chain.outputs, news);
            expect(diff).toEqual(await modelChainProvider.diff!(chain.id, chain.outputs, news));
        }
        expect((await loaded.diff!(chain.id, chain.outputs, chain.inputs)).changes).toBe(false);
    });
});

describe("local-native stack (backend native): vLLM's own multi-node, no Ray", () => {
    const NATIVE_T = "vllm-cluster:index:ServeEndpoint";
    let cfg: ClusterConfig;
    let run: Run;
    beforeAll(async () => {
        cfg = validateConfig(loadStackRaw("local-native"));
        run = await runStack("local-native", cfg);
    }, 120000);

    test("graph: hosts, image, key, one serve container per host and rank 0's readiness; no Ray containers or probe", () => {
        const rows: [string, string, string, string][] = [];
        for (const n of cfg.nodes) {
            rows.push(
                [n.name, T.node, "", ""],
                [`${n.name}-docker`, T.provider, n.name, ""],
                [`${n.name}-preflight`, T.command, n.name, ""],
            );
            rows.push([`image-${n.name}`, T.presence, "image", ""]);
        }
        rows.push(["image", T.image, "", ""], ["api-key", T.password, "serve", ""], ["roster", T.dynamic, "", ""]);
        // model.source: the model is copied from spark-1 to spark-2
        rows.push(["model", "vllm-cluster:index:ModelDistribution", "", ""], ["model-chain", T.dynamic, "model", ""]);
        rows.push(
            ["serve", NATIVE_T, "", ""],
            ["serve-api-key-file", T.dynamic, "serve", ""],
            ["serve-rank-0-args-check", T.dynamic, "serve", ""],
            ["serve-rank-0-container", T.container, "serve", "spark-1-docker"],
            ["serve-rank-1-args-check", T.dynamic, "serve", ""],
            ["serve-rank-1-container", T.container, "serve", "spark-2-docker"],
            ["serve-readiness", T.dynamic, "serve", ""],
            ["serve-tls-cert-file", T.dynamic, "serve", ""],
            ["serve-tls-key-file", T.dynamic, "serve", ""],
            ["image-chain", T.dynamic, "image", ""],
        );
        expect(run.resources.map((r) => [r.name, r.type, r.parent, r.provider])).toEqual(rows.sort((a, b) => a[0].localeCompare(b[0])));
        for (const r of run.resources.filter((x) => x.type === T.container)) {
            expect(r.inputs.name).toBe("vllm-serve");
            expect(r.inputs).toMatchObject({
                networkMode: "host",
                ipcMode: "host",
                restart: "on-failure",
                mustRun: true,
            });
            expect(r.deleteBeforeReplace).toBe(true);
            expect(labelsOf(r)["vllm-cluster.stack"]).toBe("local-native");
        }
    });

    test("preflight checks the host ports each rank labels: rank 0 serve + master port, other ranks none", () => {
        expectPreflightPortsMatchLabels(run, cfg);
        expect(get(run, `${cfg.head.name}-preflight`).inputs.create).toContain(
            `${arg(`ports=${cfg.serve.port},${cfg.native.masterPort}`)}\n`,
        );
    });

    test("dependencies are data: rank 1 takes rank 0's container ID, readiness takes every rank's", () => {
        const r0 = get(run, "serve-rank-0-container");
        const r1 = get(run, "serve-rank-1-container");
        expect(r0.inputs.image).toBe(imageIdOn(run, "spark-1"));
        expect(r0.dependsOn).toContain("serve-api-key-file");
        expect(r1.inputs.image).toBe(imageIdOn(run, "spark-2"));
        expect(r0.inputs.image).not.toBe(r1.inputs.image);
        expect(labelsOf(r1)["vllm-cluster.rank0-container-id"]).toBe(r0.id);
        expect(labelsOf(r0)["vllm-cluster.api-key-sha256"]).toBe(apiKeyHash(MOCK_API_KEY));
        expect(get(run, "serve-readiness").inputs.triggers).toEqual([r0.id, r1.id]);
        expect(run.resolved.clusterFingerprint).toBe(joinFingerprint([r0.id, r1.id]));
        expect(get(run, "serve-api-key-file").inputs.key).toEqual(secretValue(MOCK_API_KEY));
        // serve.tls: rank 0 serves HTTPS with the installed files; a headless rank gets neither files nor flags
        expect(r0.dependsOn).toEqual(expect.arrayContaining(["serve-tls-cert-file", "serve-tls-key-file"]));
        expect(get(run, "serve-tls-key-file").inputs.key).toEqual(secretValue(TEST_TLS.key));
        expect(labelsOf(r0)["vllm-cluster.tls-sha256"]).toBe(
            secretHash("tls certificate", TEST_TLS.cert) + secretHash("tls key", TEST_TLS.key),
        );
        expect(r0.inputs.command).toEqual(expect.arrayContaining(["--ssl-certfile", "--ssl-keyfile"]));
        expect(JSON.stringify(r1.inputs)).not.toMatch(/ssl|tls/);
        expect(run.resolved.endpoint).toBe(`https://${cfg.head.sshHost}:${cfg.serve.port}/v1`);
    });

    test("dependencies are data: each input waits on exactly the resources it is made from", async () => {
        const deps: PropertyDependencies = await dependenciesByValue("local-native", cfg, run);
        expect(deps["serve-rank-0-container"].image).toEqual(["image-spark-1"]);
        expect(deps["serve-rank-1-container"].image).toEqual(["image-spark-2"]);
        expect(deps["serve-rank-0-container"].labels).toEqual(["api-key", "model-chain"]);
        expect(deps["serve-rank-1-container"].labels).toEqual(["model-chain", "serve-rank-0-container"]);
        expect(deps["serve-readiness"].triggers).toEqual(["serve-rank-0-container", "serve-rank-1-container"]);
        expect(deps["serve-api-key-file"].key).toEqual(["api-key"]);
        expect(deps["serve-api-key-file"].keyHash).toEqual(["api-key"]);
    }, 60000);

    test.each([
        ["serve-rank-0-container", ["serve-rank-1-container", "serve-readiness"]],
        ["serve-rank-1-container", ["serve-readiness"]],
        ["image-spark-2", ["serve-rank-1-args-check", "serve-rank-1-container", "serve-readiness"]],
        ["model-chain", ["serve-rank-0-container", "serve-rank-1-container", "serve-readiness"]],
        ["api-key", ["serve-api-key-file", "serve-rank-0-container", "serve-rank-1-container", "serve-readiness"]],
    ])("a changed %s output changes the inputs of exactly %j", async (upstream, changed) => {
        expect(await changedBy("local-native", cfg, run, upstream)).toEqual(changed);
    });

    test("command lines and labels per rank", () => {
        const r0 = get(run, "serve-rank-0-container");
        const r1 = get(run, "serve-rank-1-container");
        const flags = (r: Rec) => {
            const c = r.inputs.command as string[];
            return ["--nnodes", "--node-rank", "--master-addr", "--master-port", "--distributed-executor-backend"].map(
                (f) => c[c.indexOf(f) + 1],
            );
        };
        expect(flags(r0)).toEqual(["2", "0", "10.232.0.11", "29500", "mp"]);
        expect(flags(r1)).toEqual(["2", "1", "10.232.0.11", "29500", "mp"]);
        expect(r0.inputs.command).not.toContain("--headless");
        expect(r1.inputs.command).toContain("--headless");
        // no watchdog with backend native (a rank 0 restarted alone would not bring the headless rank back)
        expect(initOf(r0).then).toEqual(SERVE_ENTRYPOINT);
        expect(initOf(r1).then).toEqual(["/usr/bin/env"]);
        // rank 0 is healthy once its /health answers; a headless rank, which has none, once it outlived the load time
        // (this stack serves HTTPS: serve.tls)
        expect(initOf(r0).args["healthy-url"]).toBe(`https://127.0.0.1:${cfg.serve.port}/health`);
        expect(initOf(r1).args["stable-seconds"]).toBe(String(cfg.serve.readyTimeoutSeconds));
        expect(envOf(r0).VLLM_HOST_IP).toBe("10.232.0.11");
        expect(envOf(r1).VLLM_HOST_IP).toBe("10.232.0.12");
        expect(envOf(r1).NCCL_SOCKET_IFNAME).toBe("fabric0");
        expect(envOf(r1).GLOO_SOCKET_IFNAME).toBe("fabric0");
        expect(labelsOf(r0)).toMatchObject({
            "vllm-cluster.role": "serve",
            "vllm-cluster.node-rank": "0",
            "vllm-cluster.ports": JSON.stringify({ serve: 8000, master: 29500 }),
            "vllm-cluster.api-key-file": "/run/vllm-cluster/api-key",
            "vllm-cluster.cluster-gpus": "2",
        });
        expect(labelsOf(r1)).toMatchObject({ "vllm-cluster.role": "serve", "vllm-cluster.node-rank": "1", "vllm-cluster.ports": "{}" });
        expect(labelsOf(r1)["vllm-cluster.api-key-file"]).toBeUndefined();
    });

    test("the API key travels only as the key file's secret input", () => {
        for (const r of run.resources) {
            const inputs = { ...r.inputs };
            if (r.name === "serve-api-key-file") {
                expect(inputs.key).toEqual({ [SECRET_SIG]: SECRET_SIG_VALUE, value: MOCK_API_KEY });
                delete inputs.key;
            }
            expect(JSON.stringify(inputs)).not.toContain(MOCK_API_KEY);
        }
        expect(run.resolved.apiKeyIsSecret).toBe(true);
    });

    test("outputs: endpoint on the head, a join fingerprint, no Ray dashboard", () => {
        expect(run.resolved.endpoint).toBe("https://10.231.0.11:8000/v1");
        expect(run.resolved.clusterFingerprint).toMatch(/^[0-9a-f]{16}$/);
        expect(run.outputs.rayDashboard).toBe("none (backend native runs no Ray)");
    });

    async function scope(mutate: (raw: Raw) => void) {
        const raw = deepClone(loadStackRaw("local-native"));
        mutate(raw);
        return diffRuns(run, await runStack("local-native", validateConfig(raw)));
    }

    test("restart scope: nothing changed, nothing changes", async () => {
        expect(await scope(() => undefined)).toEqual({ added: [], removed: [], changed: [] });
    });

    /** What a change of every rank's command restarts: each rank's check and container, and the readiness check. */
    const RANKS_RESTARTED = [
        "serve-rank-0-args-check",
        "serve-rank-0-container",
        "serve-rank-1-args-check",
        "serve-rank-1-container",
        "serve-readiness",
    ];

    test("restart scope: a serve argument replaces every rank's serve container (and re-checks), nothing else", async () => {
        expect(await scope((r) => (r.serve.maxModelLen = 2048))).toEqual({
            added: [],
            removed: [],
            changed: RANKS_RESTARTED,
        });
    });

    test("restart scope: ray-only keys are ignored by backend native", async () => {
        expect(await scope((r) => (r.ray = { gcsPort: 6380, dashboardPort: 8266 }))).toEqual({ added: [], removed: [], changed: [] });
    });

    test("restart scope: the master port replaces every rank", async () => {
        expect(await scope((r) => (r.native.masterPort = 29600))).toEqual({
            added: [],
            removed: [],
            changed: [...RANKS_RESTARTED, "spark-1-preflight"],
        });
    });

    test("switching backend ray -> native swaps the Ray containers and probe for serve ranks", async () => {
        const raw = deepClone(loadStackRaw("local"));
        raw.backend = "native";
        const d = diffRuns(runs.local, await runStack("local", validateConfig(raw)));
        expect(d.added).toEqual(["serve-rank-0-args-check", "serve-rank-0-container", "serve-rank-1-args-check", "serve-rank-1-container"]);
        expect(d.removed).toEqual([
            "cluster-ready",
            "cluster-ready-probe",
            "ray-head",
            "ray-head-container",
            "ray-token",
            "ray-worker-spark-2",
            "ray-worker-spark-2-container",
            "serve-args-check",
            "serve-container",
            "spark-1-ray-token-file",
            "spark-2-ray-token-file",
        ]);
    });
});

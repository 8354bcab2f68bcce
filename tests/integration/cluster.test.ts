/**
 * The `local` stack (backend ray: Ray head on spark-1, worker on spark-2, vLLM serve on the head) deployed on the
 * simulated hosts by the real Pulumi engine and provider plugins, through the Automation API. Run by
 * tests/integration/run.sh (root, testbed up, toolchain on PATH), never by the unit run.
 */
import { X509Certificate } from "crypto";
import { spawn } from "child_process";
import * as fs from "fs";
import * as os from "os";
import * as path from "path";
import * as tls from "tls";
import { RAY_TOKEN_ENV } from "../../infra/builders/containers";
import { RAY_TOKEN_CONTAINER_PATH, apiKeyHostPath, compileCacheHostDir, nodeStateDir, rayTokenHostPath } from "../../infra/builders/node";
import { shellQuote } from "../../infra/builders/quote";
import { sshOptions } from "../../infra/builders/ssh";
import { colouredPixels, decodePng } from "../lib/png";
import { CONTAINER, LABEL } from "../../infra/contract";
import { serveArgsCheckCommand } from "../../infra/builders/serveArgsCheck";
import { serveArgsCheckProvider } from "../../infra/providers/serveArgsCheck";
import {
    OpResult,
    Project,
    changed,
    cliExport,
    destroy,
    editConfig,
    expectOk,
    openProject,
    preview,
    refresh,
    removeProject,
    stateResources,
    up,
} from "./engine";
import { HANDOFF, expectNothingLeft, handOver } from "./handoff";
import { Hosts, runArgv, sharedSshSocketDir, sshdAccepted, sshdLogMarks, sshdTrafficSince, stackConfig, waitFor } from "./hosts";
import { Answer, greedyAnswer, tp1Reference } from "./reference";
import { chat, completionTokens, ensureServing, mergeTimings, request } from "./support";

// eslint-disable-next-line @typescript-eslint/no-require-imports
const { DASHBOARDS } = require("../../setup/dashboards") as { DASHBOARDS: { panels: { title: string; queries: { expr: string }[] }[] }[] };

const STACK = "local";
const TESTBED = process.env.VCL_TESTBED_DIR ?? "/var/lib/vllm-cluster-testbed";
const TIMINGS_FILE = process.env.VCL_INTEGRATION_TIMINGS;
const timings: Record<string, number> = {};

let p: Project;
let hosts: Hosts;
let endpoint = "";
let apiKey = "";
let model = "";
let tp1: Answer;
let handedOver = false;
const head = "spark-1";
const worker = "spark-2";

async function timedUp(name: string, opts: Parameters<typeof up>[1] = {}): Promise<OpResult> {
    const r = await up(p, opts);
    timings[name] = Math.round(r.seconds * 10) / 10;
    return r;
}

/** Every test after the first converging up starts from a serving cluster, whatever the test before it left. */
async function serving(): Promise<void> {
    ({ endpoint, apiKey } = await ensureServing(p, model, { endpoint, apiKey }));
}

async function ids(): Promise<Record<string, string>> {
    return {
        head: await hosts.containerId(head, CONTAINER.rayHead),
        worker: await hosts.containerId(worker, CONTAINER.rayWorker),
        serve: await hosts.containerId(head, CONTAINER.serve),
    };
}

beforeAll(async () => {
    p = await openProject(STACK);
    hosts = new Hosts(stackConfig(p.stackFile));
    model = hosts.cfg.model.servedName;
    // Start from empty: no container of any project stack on the two hosts, and no image on spark-2 (so it is copied).
    for (const n of [head, worker]) {
        await hosts.removeProjectContainers(n);
    }
    await hosts.docker(worker, ["image", "rm", "--force", hosts.cfg.image.ref]);
    // before the cluster takes the cores: TP=1 on one host, the reference for what TP=2 must say
    const t0 = Date.now();
    tp1 = await tp1Reference(hosts);
    timings["tp1-reference"] = Math.round((Date.now() - t0) / 100) / 10;
}, 900_000);

afterAll(async () => {
    if (TIMINGS_FILE) {
        mergeTimings(TIMINGS_FILE, timings);
    }
    if (p && !handedOver) {
        if (process.env.VCL_INTEGRATION_KEEP !== "1") {
            await destroy(p);
        }
        removeProject(p);
    }
}, 600_000);

describe("backend ray on the simulated hosts through the real Pulumi engine", () => {
    test("preview from empty plans every resource as a create and opens no ssh connection", async () => {
        const before = sshdAccepted(TESTBED, [head, worker]);
        const r = expectOk(await preview(p));
        const creates = Object.entries(r.ops)
            .filter(([, op]) => op === "create")
            .map(([n]) => n);
        expect(Object.values(r.ops).every((op) => op === "create")).toBe(true);
        for (const n of [
            "spark-1-preflight",
            "spark-2-preflight",
            "image-chain",
            "image-spark-1",
            "image-spark-2",
            "api-key",
            "ray-head-container",
            "ray-worker-spark-2-container",
            "cluster-ready-probe",
            "serve-api-key-file",
            "serve-container",
            "serve-readiness",
        ]) {
            expect(creates).toContain(n);
        }
        expect(sshdAccepted(TESTBED, [head, worker])).toEqual(before);
    }, 300_000);

    test("up fails naming node and port while another process holds the serve port; the next up converges", async () => {
        const port = hosts.cfg.serve.port;
        // the manual deployment's stopped proxy: something that is not this project listens on the serve port
        const squatter = runArgv(
            [
                "ip",
                "netns",
                "exec",
                "vcl-h1",
                "timeout",
                "600",
                "python3",
                "-m",
                "http.server",
                String(port),
                "--bind",
                hosts.node(head).sshHost,
            ],
            { timeoutMs: 700_000 },
        ).catch(() => undefined);
        const listening = async () =>
            (await runArgv(["ip", "netns", "exec", "vcl-h1", "ss", "-Hltn", `sport = :${port}`])).stdout.trim() !== "";
        await waitFor(`a listener on port ${port} in vcl-h1`, listening, 15_000, 250);
        try {
            const failed = await timedUp("up-blocked-by-port");
            expect(failed.ok).toBe(false);
            expect(failed.output + failed.error).toContain(
                `preflight failed on node spark-1 (root@10.231.0.11): port ${port} is already in use on the host, not by this project`,
            );
            expect(await hosts.containerId(head, CONTAINER.rayHead)).toBe("");
            // Preflight gates the heavy work: the 3 GB image never started towards spark-2 (no chain step, no
            // image there), so the failed up took the preflights' seconds, not a copy's minutes (in the timings).
            expect(failed.ops["image-chain"]).toBeUndefined();
            expect(failed.ops[`image-${worker}`]).toBeUndefined();
            expect(await hosts.imageId(worker, hosts.cfg.image.ref)).toBe("");
        } finally {
            await runArgv(["ip", "netns", "exec", "vcl-h1", "pkill", "-f", `http.server ${port}`]);
            await squatter;
        }
        await waitFor(`port ${port} free`, async () => !(await listening()), 15_000, 250);

        const r = expectOk(await timedUp("up-from-empty-to-serving"));
        endpoint = r.outputs.endpoint as string;
        apiKey = r.outputs.apiKey as string;
        expect(endpoint).toBe(`https://${hosts.node(head).sshHost}:${port}/v1`);
        expect(apiKey).toMatch(/^[A-Za-z0-9]{48}$/);
        expect(r.outputs.servedModelName).toBe(model);
        expect(changed(r).filter((c) => !c.startsWith("create "))).toEqual([]);
        const idHead = await hosts.imageId(head, hosts.cfg.image.ref);
        expect(idHead).toMatch(/^sha256:/);
        expect(await hosts.imageId(worker, hosts.cfg.image.ref)).toBe(idHead);
        for (const [n, c] of [
            [head, CONTAINER.rayHead],
            [worker, CONTAINER.rayWorker],
            [head, CONTAINER.serve],
        ]) {
            expect(await hosts.inspect(n, c, "{{.State.Running}}")).toBe("true");
        }
        // the launch, as the readiness wait measured it: from serve's start (docker's own) to the first completion
        const launch = r.outputs.launch as {
            readySeconds: number;
            firstCompletionSeconds: number;
            waitedSeconds: number;
            startedAt: string;
        };
        expect(launch.startedAt).toBe(await hosts.inspect(head, CONTAINER.serve, "{{.State.StartedAt}}"));
        expect(launch.readySeconds).toBeGreaterThan(launch.firstCompletionSeconds);
        expect(launch.firstCompletionSeconds).toBeGreaterThan(0);
        expect(launch.waitedSeconds).toBeGreaterThan(0);
        expect(launch.waitedSeconds).toBeLessThan(r.seconds);
        timings["launch: serve ready after its start"] = launch.readySeconds;
    }, 1_800_000);

    test("serving: /health 200, chat with the key 200, 401 without or with a wrong key, vLLM's own /metrics", async () => {
        await serving();
        const base = endpoint.replace(/\/v1$/, "");
        expect((await request("GET", `${base}/health`)).status).toBe(200);
        const ok = await chat(endpoint, model, apiKey);
        expect(ok.status).toBe(200);
        expect(completionTokens(ok)).toBeGreaterThan(0);
        expect((await chat(endpoint, model)).status).toBe(401);
        expect((await chat(endpoint, model, "wrong-key")).status).toBe(401);
        const metrics = await request("GET", `${base}/metrics`);
        expect(metrics.status).toBe(200);
        expect(metrics.body).toMatch(/^vllm:request_success_total\{.*\} [1-9]/m);
        expect(metrics.body).toMatch(/^vllm:prompt_tokens_total\{.*\} [1-9]/m);
    }, 300_000);

    test("monitoring: every target up; a completion's tokens in PromQL; every dashboard panel has data; the graph renders in headless Chromium", async () => {
        await serving();
        const m = hosts.cfg.monitoring!;
        // Prometheus's HTTP API on the head's loopback, where it listens (a user on the head, or at the end of the tunnel)
        const api = async <T>(query: string): Promise<T> => {
            const out = await hosts.must(head, ["curl", "-sS", "--fail", "--max-time", "10", `http://127.0.0.1:${m.port}${query}`]);
            return (JSON.parse(out) as { data: T }).data;
        };
        const value = async (expr: string): Promise<{ metric: Record<string, string>; value: [number, string] }[]> =>
            (
                await api<{ result: { metric: Record<string, string>; value: [number, string] }[] }>(
                    `/api/v1/query?query=${encodeURIComponent(expr)}`,
                )
            ).result;
        // Prometheus listens on loopback only: not on the management address
        expect(
            (await hosts.on(head, ["curl", "-sS", "--max-time", "5", `http://${hosts.node(head).sshHost}:${m.port}/-/ready`])).code,
        ).not.toBe(0);

        type Target = { labels: Record<string, string>; health: string; lastError: string; scrapeUrl: string };
        let targets: Target[] = [];
        await waitFor(
            "every Prometheus target up",
            async () => {
                targets = (await api<{ activeTargets: Target[] }>("/api/v1/targets")).activeTargets;
                return targets.length === 6 && targets.every((t) => t.health === "up");
            },
            90_000,
            2000,
        ).catch((e: Error) => {
            throw new Error(`${e.message}: ${JSON.stringify(targets.map((t) => [t.scrapeUrl, t.health, t.lastError]))}`);
        });
        const jobs = targets.map((t) => `${t.labels.job} ${t.labels.node}`).sort();
        expect(jobs).toEqual(["node spark-1", "node spark-2", "prometheus spark-1", "ray spark-1", "ray spark-2", "vllm spark-1"]);
        // the node exporters and Ray on the fabric, vLLM over TLS
        expect(
            targets.filter((t) => t.labels.job === "node" || t.labels.job === "ray").every((t) => /\/\/10\.232\.0\.\d+:/.test(t.scrapeUrl)),
        ).toBe(true);
        expect(targets.find((t) => t.labels.job === "vllm")!.scrapeUrl).toMatch(/^https:\/\//);

        // a completion's tokens reach Prometheus
        const tokens = async () => Number((await value("sum(vllm:generation_tokens_total)"))[0]?.value[1] ?? "0");
        const before = await tokens();
        const answer = await chat(endpoint, model, apiKey, 12);
        expect(answer.status).toBe(200);
        const generated = completionTokens(answer);
        expect(generated).toBeGreaterThan(0);
        await waitFor("the completion's tokens in Prometheus", async () => (await tokens()) >= before + generated, 60_000, 1000);

        // every query of every dashboard returns data (a panel naming a series no target exports would be empty)
        await waitFor("a scrape after the completion", async () => (await value("sum(vllm:num_requests_running)")).length > 0, 30_000);
        await new Promise((r) => setTimeout(r, (m.scrapeIntervalSeconds + 1) * 1000 * 2));
        const empty: string[] = [];
        for (const d of DASHBOARDS) {
            for (const panel of d.panels) {
                for (const q of panel.queries) {
                    const r = await value(q.expr);
                    if (r.length === 0) empty.push(`${panel.title}: ${q.expr}`);
                }
            }
        }
        expect(empty).toEqual([]);
        const budget = await value("vllm_cluster_container_starts");
        expect(budget.map((s) => `${s.metric.node} ${s.metric.container}`).sort()).toEqual(
            expect.arrayContaining([`spark-1 ${CONTAINER.serve}`, `spark-1 ${CONTAINER.rayHead}`, `spark-2 ${CONTAINER.rayWorker}`]),
        );

        // the Prometheus UI's graph of a vLLM metric, through the ssh tunnel the stack output names, in headless Chromium
        const shots = process.env.VCL_RESULTS_DIR ?? fs.mkdtempSync(path.join(os.tmpdir(), "vcl-monitoring-"));
        fs.mkdirSync(shots, { recursive: true });
        const local = 19090;
        const tunnel = spawn(
            "ssh",
            [
                ...sshOptions(hosts.target(head)),
                "-o",
                "ExitOnForwardFailure=yes",
                "-N",
                "-L",
                `${local}:127.0.0.1:${m.port}`,
                "--",
                `root@${hosts.node(head).sshHost}`,
            ],
            { stdio: "ignore" },
        );
        try {
            await waitFor(
                "the ssh tunnel to Prometheus",
                async () => (await runArgv(["curl", "-sf", `http://127.0.0.1:${local}/-/ready`])).code === 0,
                20_000,
                500,
            );
            const shot = async (file: string, expr: string) => {
                const url = `http://127.0.0.1:${local}/graph?g0.expr=${encodeURIComponent(expr)}&g0.tab=0&g0.range_input=5m`;
                const r = await runArgv(
                    [
                        "chromium",
                        "--headless",
                        "--no-sandbox",
                        "--disable-gpu",
                        "--hide-scrollbars",
                        "--window-size=1280,900",
                        "--virtual-time-budget=15000",
                        `--screenshot=${file}`,
                        url,
                    ],
                    { timeoutMs: 120_000 },
                );
                if (r.code !== 0 || !fs.existsSync(file)) throw new Error(`chromium exit ${r.code}: ${r.stderr.slice(-800)}`);
                const png = decodePng(fs.readFileSync(file));
                expect([png.width, png.height]).toEqual([1280, 900]);
                // the graph's plot area in Debian's Prometheus 2.42 UI at this window size, right of the "Add Graph" button a page
                // without a graph has there (the axes are grey, the line coloured)
                return { all: colouredPixels(png), plot: colouredPixels(png, 80, { x0: 130, y0: 340, x1: 1218, y1: 740 }) };
            };
            const plot = await shot(path.join(shots, "monitoring-graph.png"), "sum(rate(vllm:generation_tokens_total[1m]))");
            const none = await shot(path.join(shots, "monitoring-graph-empty.png"), "vllm:no_such_series");
            timings["monitoring-screenshot-plot-pixels"] = plot.plot;
            timings["monitoring-screenshot-empty-pixels"] = none.plot;
            // a line in the plot area, and none there for a query that returns nothing (the page's own colours are elsewhere)
            expect(plot.plot).toBeGreaterThan(150);
            expect(none.plot).toBeLessThan(20);
            expect(plot.all - none.all).toBeGreaterThan(150);
        } finally {
            tunnel.kill();
        }
    }, 600_000);

    test("HTTPS only: the certificate served is the stack's and names the head; plain HTTP gets no answer from the API", async () => {
        await serving();
        const url = new URL(endpoint);
        expect(url.protocol).toBe("https:");
        // request() trusts only the stack's certificate and checks the address against it: a 200 proves both
        expect((await request("GET", `${url.origin}/health`)).status).toBe(200);
        const served = await new Promise<string>((resolve, reject) => {
            const s = tls.connect({ host: url.hostname, port: Number(url.port), rejectUnauthorized: false }, () => {
                resolve(s.getPeerX509Certificate()?.fingerprint256 ?? "");
                s.end();
            });
            s.on("error", reject);
        });
        const ours = new X509Certificate(fs.readFileSync(hosts.cfg.serve.tls!.certFile!)).fingerprint256;
        expect(served).toBe(ours);
        // the same port over plain HTTP: the key in this request would cross in clear; the server never answers it
        const plain = await request("POST", `http://${url.host}/v1/chat/completions`, { key: apiKey, body: {} }).catch((e: Error) => e);
        // (an error from node's http module: not an `instanceof Error` in jest's realm, so tell it by its shape)
        expect("status" in plain ? `HTTP ${plain.status}` : "no HTTP answer").toBe("no HTTP answer");
    }, 300_000);

    test("every port listening on a host is in the port contract, in Ray's worker range, or bound to the fabric or loopback", async () => {
        await serving();
        const { minWorkerPort: lo, maxWorkerPort: hi } = hosts.cfg.ray;
        for (const n of hosts.cfg.nodes) {
            // what the containers on this host claim (their `ports` labels: what preflight and the policy pack check)
            const labels = await hosts.docker(n.name, [
                "ps",
                "--filter",
                `label=${LABEL.stack}=${STACK}`,
                "--format",
                `{{.Label "${LABEL.ports}"}}`,
            ]);
            const claimed = new Set(
                labels.stdout
                    .split("\n")
                    .filter(Boolean)
                    .flatMap((l) => Object.values(JSON.parse(l) as Record<string, number>)),
            );
            claimed.add(n.sshPort);
            const ss = await hosts.must(n.name, ["ss", "-Hltnp"]);
            const stray = ss
                .split("\n")
                .filter(Boolean)
                .map((l) => l.trim().split(/\s+/))
                .map((f) => ({ at: f[3], who: (/\(\("([^"]+)"/.exec(f[5] ?? "") ?? [])[1] ?? "?" }))
                .filter(({ at }) => {
                    const port = Number(at.slice(at.lastIndexOf(":") + 1));
                    const addr = at
                        .slice(0, at.lastIndexOf(":"))
                        .replace(/^\[|\]$/g, "")
                        .replace(/^::ffff:/, "");
                    const private_ = addr === n.fabricIp || addr === "127.0.0.1" || addr === "::1";
                    return !private_ && !claimed.has(port) && !(port >= lo && port <= hi);
                })
                .map(({ at, who }) => `${at} (${who})`);
            // The one known gap (docs/security.md, "What crosses which network": open): on the head, the tensor-parallel rank 0
            // (a Ray worker process) holds torch.distributed's store, which PyTorch binds on every interface at a port
            // vLLM picks at random. Exactly that one, nothing else, on the head only.
            const known = n.name === hosts.cfg.head.name ? stray.filter((s) => /^\*:\d+ \(ray::RayWorkerP\)$/.test(s)) : [];
            expect(known.length).toBeLessThanOrEqual(1);
            expect([n.name, stray.filter((s) => !known.includes(s))]).toEqual([n.name, []]);
            expect(claimed.size).toBeGreaterThan(1);
        }
    }, 120_000);

    test("TP 2 across the two hosts (Ray) generates exactly the tokens of TP 1 on one host, greedy", async () => {
        await serving();
        const tp2 = await greedyAnswer(endpoint, model, apiKey);
        expect(tp2.completion).toHaveLength(16);
        expect(tp2.completion).toEqual(tp1.completion);
        expect(tp2.chat).toBe(tp1.chat);
    }, 300_000);

    test("a second up changes nothing and opens no ssh connection", async () => {
        await serving();
        const idsBefore = await ids();
        // counted around the up alone: the ids() calls are this test's own ssh connections
        const before = sshdAccepted(TESTBED, [head, worker]);
        const r = expectOk(await timedUp("no-op-up", { expectNoChanges: true }));
        expect(changed(r)).toEqual([]);
        const after = sshdAccepted(TESTBED, [head, worker]);
        expect(after).toEqual(before);
        expect(await ids()).toEqual(idsBefore);
    }, 600_000);

    test("a refresh's sessions to a host share a connection; the next operation, right after, connects anew", async () => {
        await serving();
        const marks = sshdLogMarks(TESTBED, [head, worker]);
        expectOk(await refresh(p));
        const first = sshdTrafficSince(TESTBED, marks);
        // the key, token, image and gate checks of one host ran in one connection of the dynamic provider's
        expect(first[head].maxSessionsPerConnection).toBeGreaterThanOrEqual(3);
        expect(first[head].connections).toBeLessThan(first[head].sessions);
        timings["refresh-ssh-connections"] = first[head].connections + first[worker].connections;
        timings["refresh-ssh-sessions"] = first[head].sessions + first[worker].sessions;
        // that refresh's masters are still open (they close when idle for 30 s), and are not joined by the next one:
        // it opens connections of its own, whose host keys are checked against known_hosts as it is now
        const sockets = sharedSshSocketDir();
        const open = fs.readdirSync(sockets).filter((f) => fs.statSync(`${sockets}/${f}`).isSocket());
        expect(open.length).toBeGreaterThan(0);
        const again = sshdLogMarks(TESTBED, [head, worker]);
        expectOk(await refresh(p));
        const second = sshdTrafficSince(TESTBED, again);
        for (const n of [head, worker]) {
            expect(second[n].connections).toBeGreaterThanOrEqual(1);
        }
    }, 600_000);

    test("preflight re-run against the deployed cluster passes: the ports it holds are its own containers'", async () => {
        await serving();
        const r = expectOk(await up(p, { replace: [urn("command:local:Command", "spark-1-preflight")] }));
        expect(changed(r)).toEqual(["replace spark-1-preflight"]);
    }, 600_000);

    test("the API key is in no docker inspect, process command line, container log, state export or stack file", async () => {
        await serving();
        for (const n of [head, worker]) {
            const all = (await hosts.must(n, ["docker", "ps", "--all", "--quiet"])).trim().split("\n").filter(Boolean);
            expect(all.length).toBeGreaterThan(0);
            expect(await hosts.must(n, ["docker", "inspect", ...all])).not.toContain(apiKey);
            for (const c of all) {
                const logs = await hosts.docker(n, ["logs", c]);
                expect(logs.stdout + logs.stderr).not.toContain(apiKey);
            }
        }
        const ps = await hosts.must(head, ["ps", "-eo", "pid,args", "--no-headers", "-ww"]);
        expect(ps).toContain("vllm serve");
        expect(ps).not.toContain(apiKey);
        const exported = await cliExport(p);
        expect(exported).toContain('"apiKey"');
        expect(exported).not.toContain(apiKey);
        expect(fs.readFileSync(p.stackFile, "utf8")).not.toContain(apiKey);
        expect(p.lastOutput.join("")).not.toContain(apiKey);
        const keyFile = apiKeyHostPath(hosts.cfg.stateDir, head);
        expect((await hosts.must(head, ["stat", "-c", "%a %F", keyFile])).trim()).toBe("600 regular file");
    }, 300_000);

    test("neither the API key nor the Ray token is in any process environment of any container on any host", async () => {
        await serving();
        const token = (await hosts.must(head, ["cat", rayTokenHostPath(hosts.cfg.stateDir, head)])).trim();
        expect(token.length).toBeGreaterThanOrEqual(32);
        let scanned = 0;
        for (const n of [head, worker]) {
            const listed = (await hosts.must(n, ["docker", "ps", "--format", `{{.ID}} {{.Label "${LABEL.role}"}}`])).trim().split("\n");
            for (const [c, role] of listed.filter(Boolean).map((l) => l.split(" "))) {
                // every process of the container, Ray's workers and vLLM's ranks included, as the container sees them
                const env = await hosts.must(n, [
                    "docker",
                    "exec",
                    c,
                    "sh",
                    "-c",
                    'for e in /proc/[0-9]*/environ; do tr "\\0" "\\n" <"$e" 2>/dev/null; echo; echo "--- $e"; done',
                ]);
                scanned += (env.match(/^--- /gm) ?? []).length;
                // what shows the scan reads the right environments: the model's containers all carry it
                if (role !== "monitoring") expect(env).toContain("VLLM_HOST_IP=");
                expect(env).not.toContain(apiKey);
                expect(env).not.toContain(token);
            }
        }
        // the head's Ray and serve processes and the worker's: far more than the containers' own shells
        expect(scanned).toBeGreaterThan(10);
        timings["environ-processes-scanned"] = scanned;
    }, 300_000);

    test("each node's state directories are private to the login user: another local user can plant nothing there", async () => {
        for (const n of [head, worker]) {
            const dir = nodeStateDir(hosts.cfg.stateDir, n);
            const modes = await hosts.must(n, ["stat", "-c", "%a %U %n", dir, `${dir}/tmp`, `${dir}/cache`]);
            expect(modes.trim().split("\n")).toEqual([`700 root ${dir}`, `700 root ${dir}/tmp`, `700 root ${dir}/cache`]);
            // a local user other than the login user (nobody) tries what the review did: plant a module in /tmp
            const planted = await hosts.on(n, [
                "setpriv",
                "--reuid=65534",
                "--regid=65534",
                "--clear-groups",
                "sh",
                "-c",
                `mkdir -p ${shellQuote(`${dir}/tmp/vllm-cluster-guard`)}`,
            ]);
            expect(planted.code).not.toBe(0);
            expect(planted.stderr).toContain("Permission denied");
        }
    }, 120_000);

    // Each refusal through the engine on the serving cluster: preview says so, up fails before serve is touched,
    // and the cluster still answers a real completion.
    test.each<[string, (serve: Record<string, unknown>) => void, string[]]>([
        [
            "an unknown flag",
            (s) => (s.extraArgs = [...(s.extraArgs as string[]), "--no-such-flag"]),
            ["--no-such-flag is not a flag of vLLM 0.32.0"],
        ],
        [
            "a tool call parser the image's vLLM does not know",
            (s) => Object.assign(s, { toolCallParser: "nope", enableAutoToolChoice: true }),
            ["--tool-call-parser nope: not a tool call parser of vLLM 0.32.0; it accepts: ", "qwen3_coder"],
        ],
        [
            "a value of the wrong type",
            (s) => (s.extraArgs = [...(s.extraArgs as string[]), "--max-num-seqs", "abc"]),
            ["--max-num-seqs: invalid", "'abc'"],
        ],
    ])(
        "a serve change the image's vLLM refuses (%s): preview says serve would not start, up fails naming it, the server is untouched and answers",
        async (what, change, says) => {
            await serving();
            const before = await ids();
            // the stack file's own serve section (not the validated one, which has its defaults filled in), as it was
            let saved: unknown;
            editConfig(p, (c) => {
                saved = JSON.parse(JSON.stringify(c.serve));
                change(c.serve as Record<string, unknown>);
            });
            try {
                const pv = await preview(p, { diff: true });
                expect(pv.ok).toBe(false);
                expect(pv.output + (pv.error ?? "")).toContain("serve would not start on node spark-1: ");
                for (const s of says) expect(pv.output + (pv.error ?? "")).toContain(s);
                const r = await timedUp(`serve-refused (${what})`);
                expect(r.ok).toBe(false);
                for (const s of says) expect(r.output + (r.error ?? "")).toContain(s);
                expect(r.output + (r.error ?? "")).toContain("the running server was not touched");
                expect(r.ops["serve-container"]).toBeUndefined();
                expect(await ids()).toEqual(before);
                expect((await chat(endpoint, model, apiKey)).status).toBe(200);
            } finally {
                editConfig(p, (c) => (c.serve = saved));
            }
        },
        600_000,
    );

    // The other refusals take the same path through the engine as the one above (the provider's check fails the
    // registration; serve depends on it): here the provider's own check, with the deployed check's inputs, against the
    // image on the head, for each change; the deployed command itself and a valid change pass. The six checks run at
    // once, on the first case's turn (each is a vLLM start-up on the head, mostly waiting on its own imports); each
    // case then asserts on its own result.
    const checkCases: [string, (command: string[]) => string[], string][] = [
        ["the deployed command", (c) => c, ""],
        ["a valid change (--max-num-seqs 4)", (c) => [...c, "--max-num-seqs", "4"], ""],
        ["an unknown flag", (c) => [...c, "--no-such-flag"], "--no-such-flag is not a flag of vLLM 0.32.0"],
        [
            "a tool call parser the image's vLLM does not know",
            (c) => [...c, "--enable-auto-tool-choice", "--tool-call-parser", "nope"],
            "--tool-call-parser nope: not a tool call parser of vLLM 0.32.0; it accepts: ",
        ],
        ["a value of the wrong type", (c) => [...c, "--max-model-len", "abc"], "--max-model-len: "],
        ["a choice vLLM does not offer", (c) => [...c, "--dtype", "float7"], "--dtype: invalid choice: 'float7'"],
    ];
    type CheckResult = Awaited<ReturnType<NonNullable<typeof serveArgsCheckProvider.check>>>;
    let checksOnHead: Promise<Map<string, CheckResult>> | undefined;
    const runChecksOnHead = async (): Promise<Map<string, CheckResult>> => {
        const deployed = (await stateResources(p)).find((r) => r.name === "serve-args-check");
        if (!deployed) throw new Error("no serve-args-check in the state");
        const inputs = deployed.outputs as Record<string, unknown> & { command: string[] };
        expect(inputs.command.slice(0, 2)).toEqual(["vllm", "serve"]);
        // the recorded check names its script relative to the directory the engine ran the program in: the same
        // step made here, from this checkout, with the deployed image
        const checkScript = serveArgsCheckCommand(hosts.target(head), head, String(inputs.image));
        const results = await Promise.all(
            checkCases.map(([, commandOf]) =>
                serveArgsCheckProvider.check!(undefined, { ...inputs, command: commandOf(inputs.command), checkScript, vllm: undefined }),
            ),
        );
        return new Map(checkCases.map(([what], i) => [what, results[i]]));
    };
    test.each(checkCases)(
        "the serve arguments check on the head's image: %s",
        async (what, _commandOf, says) => {
            const r = (await (checksOnHead ??= runChecksOnHead())).get(what)!;
            if (says === "") {
                expect(r.failures ?? []).toEqual([]);
                expect(r.inputs.vllm).toBe("0.32.0");
            } else {
                expect(r.failures).toHaveLength(1);
                expect(r.failures![0].reason).toContain("serve would not start on node spark-1: ");
                expect(r.failures![0].reason).toContain(says);
                expect(r.failures![0].reason).toContain("the running server was not touched");
            }
            // the checks ran beside the serving cluster and left it serving
            expect((await chat(endpoint, model, apiKey)).status).toBe(200);
        },
        300_000,
    );

    test("a serve argument change: preview names the flag; up replaces only serve and its readiness check", async () => {
        await serving();
        const before = await ids();
        const maxLen = hosts.cfg.serve.maxModelLen! / 2;
        editConfig(p, (c) => ((c.serve as Record<string, unknown>).maxModelLen = maxLen));
        const pv = expectOk(await preview(p, { diff: true }));
        // the new command is checked by the image's own vLLM on the head first (serve-args-check)
        expect(changed(pv)).toEqual(["replace serve-container", "update serve-args-check", "update serve-readiness"]);
        // what the pull-request workflow posts as a comment carries neither secret
        const token = (await hosts.must(head, ["cat", rayTokenHostPath(hosts.cfg.stateDir, head)])).trim();
        expect(pv.output).not.toContain(apiKey);
        expect(pv.output).not.toContain(token);
        expect(pv.diffs["serve-container"]).toEqual(["command"]);
        // the one changed element of the serve command line, right after its flag
        const at = serveCommandIndex("--max-model-len") + 1;
        expect(pv.output).toContain(`~ [${at}]: "${hosts.cfg.serve.maxModelLen}" => "${maxLen}"`);

        // The review's plant: a guard package that lets everything through, in the directory under the node's /tmp
        // from which the serve entrypoint used to import the guard (a package there wins over the module written
        // beside it). The new server must not import it.
        const plant = `${nodeStateDir(hosts.cfg.stateDir, head)}/tmp/vllm-cluster-guard`;
        await hosts.must(head, [
            "sh",
            "-c",
            `mkdir -p ${shellQuote(`${plant}/vllm_cluster_guard`)} && printf '%s\\n' 'class RequireKey:' ` +
                `'    def __init__(self, app): self.app = app' ` +
                `'    async def __call__(self, scope, receive, send): return await self.app(scope, receive, send)' ` +
                `>${shellQuote(`${plant}/vllm_cluster_guard/__init__.py`)}`,
        ]);
        const r = expectOk(await timedUp("serve-arg-change-to-serving"));
        expect(changed(r)).toEqual(["replace serve-container", "update serve-args-check", "update serve-readiness"]);
        expect((await chat(endpoint, model)).status).toBe(401);
        expect((await request("POST", `${endpoint.replace(/\/v1$/, "")}/invocations`, { body: {} })).status).toBe(401);
        await hosts.must(head, ["rm", "-rf", plant]);
        const after = await ids();
        expect(after.head).toBe(before.head);
        expect(after.worker).toBe(before.worker);
        expect(after.serve).not.toBe(before.serve);
        const models = await request("GET", `${endpoint}/models`, { key: apiKey });
        expect(models.status).toBe(200);
        expect((JSON.parse(models.body) as { data: { max_model_len: number }[] }).data[0].max_model_len).toBe(maxLen);
    }, 1_200_000);

    test("a node env value set with pulumi config set --secret stays secret: preview --diff shows [secret], never the value", async () => {
        await serving();
        const key = "vllm-cluster:nodes[1].env.HF_TOKEN";
        const value = "hf_secret_from_config_0123456789";
        await p.stack.setConfig(key, { value, secret: true }, true);
        try {
            expect(fs.readFileSync(p.stackFile, "utf8")).not.toContain(value);
            const pv = expectOk(await preview(p, { diff: true }));
            // the worker's environment changes (a new variable), so it would be replaced: the diff says so without the value
            expect(changed(pv)).toContain("replace ray-worker-spark-2-container");
            expect(pv.output).toContain("[secret]");
            expect(pv.output).not.toContain(value);
            expect(JSON.stringify(pv.events)).not.toContain(value);
        } finally {
            await p.stack.removeConfig(key, true);
        }
        // gone again: nothing to change
        expect(changed(expectOk(await preview(p)))).toEqual([]);
    }, 600_000);

    test("a Ray worker registered with its management IP fails the gate naming the host, within its bound", async () => {
        await serving();
        // The seeds' failure: Ray on the worker took the management address while vLLM used the fabric IP. An extra
        // Ray node started by hand on spark-2 with the management IP reproduces it next to the program's worker. It
        // gets the cluster's Ray token (the host's token file): without it Ray refuses it and the gate never sees it.
        const headAddress = `${hosts.node(head).fabricIp}:${hosts.cfg.ray.gcsPort}`;
        const rogue = "vcl-it-rogue-worker";
        await hosts.docker(worker, ["rm", "-f", rogue]);
        await hosts.must(worker, [
            "docker",
            "run",
            "-d",
            "--name",
            rogue,
            "--network",
            "host",
            "-v",
            `${rayTokenHostPath(hosts.cfg.stateDir, worker)}:${RAY_TOKEN_CONTAINER_PATH}:ro`,
            ...RAY_TOKEN_ENV.flatMap((e) => ["-e", e]),
            "--entrypoint",
            "/usr/bin/env",
            hosts.cfg.image.ref,
            "ray",
            "start",
            "--block",
            `--address=${headAddress}`,
            `--node-ip-address=${hosts.node(worker).sshHost}`,
            "--num-gpus=1",
            "--disable-usage-stats",
        ]);
        try {
            editConfig(p, (c) => ((c.ray as Record<string, unknown>).readyTimeoutSeconds = 45));
            const r = await timedUp("gate-fails-on-management-ip");
            expect(r.ok).toBe(false);
            expect(r.output + r.error).toMatch(
                /cluster-ready: not ready after 45s: .*hosts registered with a wrong IP: spark-2 registered as 10\.231\.0\.12 instead of its fabric IP/,
            );
            expect(r.seconds).toBeLessThan(45 + 90);
        } finally {
            await hosts.docker(worker, ["rm", "-f", rogue]);
        }
        // Restored: once Ray has noticed the rogue node is gone, the gate passes again.
        editConfig(p, (c) => ((c.ray as Record<string, unknown>).readyTimeoutSeconds = hosts.cfg.ray.readyTimeoutSeconds));
        // The failed gate left the state as it was, so restoring the timeout is no change. A refresh looks at the
        // cluster again: until Ray has declared the rogue node dead the gate is unhealthy and up waits for it; the
        // Ray containers and the server are left alone (the program's own nodes never changed).
        const healed = expectOk(await timedUp("gate-after-rogue-removed", { refresh: true }));
        expect(changed(healed).filter((c) => c !== "update cluster-ready-probe")).toEqual([]);
        expect((await chat(endpoint, model, apiKey)).status).toBe(200);
    }, 1_800_000);

    test("up --refresh after serve and a worker were killed: worker, gate, serve, readiness in order; returns serving", async () => {
        await serving();
        const before = await ids();
        // what vLLM's first request compiled on spark-2 (Inductor's kernels) is in the host's cache directory
        const kernels = () =>
            hosts.must(worker, ["sh", "-c", `find ${shellQuote(compileCacheHostDir(hosts.cfg.stateDir, worker))} -name '*.so' | sort`]);
        const kernelsBefore = await kernels();
        expect(kernelsBefore).not.toBe("");
        await hosts.must(head, ["docker", "kill", CONTAINER.serve]);
        await hosts.must(worker, ["docker", "kill", CONTAINER.rayWorker]);
        const order: string[] = [];
        const r = expectOk(await timedUp("heal-killed-serve-and-worker", { refresh: true, onStep: (n) => order.push(n) }));
        // The killed containers are replaced (a new ID, not restarted in place), which re-forms the cluster: the
        // gate waits again, serve restarts, readiness waits for a completion.
        expect(changed(r)).toEqual(
            expect.arrayContaining([
                "replace ray-worker-spark-2-container",
                "update cluster-ready-probe",
                "replace serve-container",
                "update serve-readiness",
            ]),
        );
        expect(changed(r)).not.toContain("replace ray-head-container");
        const pos = (n: string) => order.indexOf(n);
        expect(pos("ray-worker-spark-2-container")).toBeLessThan(pos("cluster-ready-probe"));
        expect(pos("cluster-ready-probe")).toBeLessThan(pos("serve-container"));
        expect(pos("serve-container")).toBeLessThan(pos("serve-readiness"));
        const after = await ids();
        expect(after.head).toBe(before.head);
        expect(after.worker).not.toBe(before.worker);
        expect(after.serve).not.toBe(before.serve);
        // up returned only once the server answers
        expect((await chat(endpoint, model, apiKey)).status).toBe(200);
        // and the replaced worker's first request reused the kernels in the host's cache instead of building new ones
        expect(await kernels()).toBe(kernelsBefore);
    }, 1_800_000);

    test("the image removed out of band from spark-2: up --refresh copies it to that host only, and nothing else changes", async () => {
        await serving();
        const before = await ids();
        const ssh0 = sshdAccepted(TESTBED, [head, worker]);
        await hosts.must(worker, ["docker", "image", "rm", "--force", hosts.cfg.image.ref]);
        expect(await hosts.imageId(worker, hosts.cfg.image.ref)).toBe("");
        const r = expectOk(await timedUp("image-removed-copied-again", { refresh: true }));
        // the copy restores the same image ID, so neither Ray container (the ones that run it) is replaced; the
        // chain streams to spark-2 only, spark-2's check follows, spark-1's is not touched
        expect(changed(r).filter((c) => c.includes("image-") || c.includes("ray-"))).toEqual([
            "update image-chain",
            "update image-spark-2",
        ]);
        expect(await hosts.imageId(worker, hosts.cfg.image.ref)).not.toBe("");
        const after = await ids();
        expect([after.head, after.worker]).toEqual([before.head, before.worker]);
        const ssh = sshdAccepted(TESTBED, [head, worker]);
        timings["image-removed-ssh-connections"] = ssh[head] + ssh[worker] - ssh0[head] - ssh0[worker];
        expect((await chat(endpoint, model, apiKey)).status).toBe(200);
    }, 1_200_000);

    if (HANDOFF) {
        // npm test: the fault suite adopts this cluster, and its last test destroys it with the checks below
        test("the cluster, serving, is handed over to the fault suite (tests/faults), which destroys it", async () => {
            await serving();
            expect((await chat(endpoint, model, apiKey)).status).toBe(200);
            handOver(p, "tests/integration/cluster.test.ts");
            handedOver = true;
        }, 600_000);
    } else {
        test("destroy removes every container and the key file, and leaves an empty state", async () => {
            const r = expectOk(await destroy(p));
            timings.destroy = Math.round(r.seconds * 10) / 10;
            await expectNothingLeft(p, hosts, [head, worker], head);
        }, 600_000);
    }
});

/** Position of `flag` in the serve container's command as deployed (the diff's element index). */
function serveCommandIndex(flag: string): number {
    const serve = knownState.find((r) => r.urn.endsWith("::serve-container"));
    const command = (serve?.inputs?.command ?? []) as string[];
    const i = command.indexOf(flag);
    if (i < 0) {
        throw new Error(`${flag} is not in the serve container's command: ${JSON.stringify(command)}`);
    }
    return i;
}

function urn(type: string, name: string): string {
    // Every resource the program registers is under a component; the engine matches --replace on the full URN,
    // so look it up in the state.
    const want = `::${name}`;
    const found = knownUrns.find((u) => u.endsWith(want) && u.includes(type));
    if (!found) {
        throw new Error(`no ${type} named ${name} in the state`);
    }
    return found;
}
let knownUrns: string[] = [];
let knownState: { urn: string; inputs?: Record<string, unknown> }[] = [];
beforeEach(async () => {
    if (p) {
        const d = await p.stack.exportStack();
        knownState = (d.deployment.resources ?? []) as { urn: string; inputs?: Record<string, unknown> }[];
        knownUrns = knownState.map((r) => r.urn);
    }
});

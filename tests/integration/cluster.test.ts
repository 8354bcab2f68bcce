/**
 * Integration on the simulated hosts (tests/testbed), spark-1 and spark-2 only, through the DIRECT DRIVER (not
 * Pulumi: the provider plugins cannot be built here). Real SSH, Docker, image save/load and Ray; the vLLM
 * stand-in serves. Every step uses the program's own builders and its image provider. Run by
 * tests/integration/run.sh (`npx jest --selectProjects integration --runInBand`), never by the unit run.
 */
import { spawn } from "child_process";
import * as fs from "fs";
import * as os from "os";
import * as path from "path";
import { LABEL_PREFIX, RAY_WORKER_CONTAINER, SshTarget, sshArgv } from "../../components/commands";
import { rayWorkerContainerArgs } from "../../components/containerArgs";
import { imagePresenceProvider } from "../../components/imageProvider";
import { NodeFacts } from "../../components/sparkNode";
import { ClusterConfig } from "../../infra/config";
import { DirectDriver, UpResult, dockerOn, loadStackFile, projectContainers, runArgv } from "./direct";
import { HttpAnswer, ensureStandInModelDir, mergeTimings, request } from "./support";
import { dockerRunArgv } from "./dockerRun";

const STACK = "local";
const STACK_FILE = path.join(__dirname, "..", "..", "stacks", `Pulumi.${STACK}.yaml`);
const work = fs.mkdtempSync(path.join(os.tmpdir(), "vcl-integration-"));
const stateFile = path.join(work, "state.json");
const TIMINGS_FILE = process.env.VCL_INTEGRATION_TIMINGS ?? path.join(work, "timings.json");

const timings: Record<string, number> = {};
const logLines: string[] = [];
const log = (m: string) => logLines.push(m);

const cfg: ClusterConfig = loadStackFile(STACK_FILE);
let driver = new DirectDriver(cfg, STACK, stateFile, log);
const head = cfg.head;
const worker = cfg.workers[0];
const ssh = (node: string): SshTarget => driver.plan.nodes.find((n) => n.node.name === node)!.ssh;

async function timed<T>(name: string, f: () => Promise<T>): Promise<T> {
    const t0 = Date.now();
    const r = await f();
    timings[name] = Math.round((Date.now() - t0) / 100) / 10;
    return r;
}

function chat(up: UpResult, key?: string): Promise<HttpAnswer> {
    return request("POST", `${up.endpoint}/chat/completions`, {
        key,
        body: { model: cfg.model.servedName, messages: [{ role: "user", content: "hello cluster" }], max_tokens: 16 },
    });
}

async function ssh1(node: string, remote: string[], timeoutMs = 60_000): Promise<string> {
    const r = await runArgv(sshArgv(ssh(node), remote), { timeoutMs });
    if (r.code !== 0) {
        throw new Error(`${remote.join(" ")} on ${node} failed (exit ${r.code}): ${r.stderr.trim()}`);
    }
    return r.stdout;
}

/** The testbed's network namespace of the head (spark-i lives in vcl-h<i>; see tests/testbed/README.md). */
const HEAD_NETNS = "vcl-h1";

/** Whether something listens on TCP `port` inside the head's namespace (what the head's own `ss` sees). */
async function headListens(port: number): Promise<boolean> {
    const r = await runArgv(["ip", "netns", "exec", HEAD_NETNS, "ss", "-Hltn", `sport = :${port}`], { timeoutMs: 10_000 });
    if (r.code !== 0) {
        throw new Error(`ss in ${HEAD_NETNS} failed (exit ${r.code}): ${r.stderr.trim()}`);
    }
    return r.stdout.trim() !== "";
}

/** Polls `cond` every 250 ms until it is true; throws after `timeoutMs`. */
async function waitFor(what: string, cond: () => Promise<boolean>, timeoutMs = 15_000): Promise<void> {
    const deadline = Date.now() + timeoutMs;
    while (!(await cond())) {
        if (Date.now() > deadline) {
            throw new Error(`${what}: not within ${timeoutMs} ms`);
        }
        await new Promise((r) => setTimeout(r, 250));
    }
}

let facts: Record<string, NodeFacts>;
let imageIds: Record<string, string>;
let up: UpResult;

beforeAll(async () => {
    ensureStandInModelDir(cfg);
    // Start from empty on spark-1/spark-2: no project containers, and no image on spark-2 (so it is copied).
    await driver.destroy();
    const rm = await dockerOn(ssh(worker.name), ["image", "rm", "--force", cfg.image.ref]);
    if (rm.code !== 0 && !/no such image/i.test(rm.stderr)) {
        throw new Error(`cannot remove ${cfg.image.ref} on ${worker.name}: ${rm.stderr}`);
    }
}, 180_000);

afterAll(async () => {
    mergeTimings(TIMINGS_FILE, timings);
    if (process.env.VCL_INTEGRATION_KEEP !== "1") {
        await driver.destroy().catch(() => undefined);
    }
    fs.rmSync(work, { recursive: true, force: true });
    console.log(`direct driver (not Pulumi) log:\n  ${logLines.join("\n  ")}\ntimings (s): ${JSON.stringify(timings)}`);
}, 180_000);

describe("vllm-cluster on simulated hosts via the direct driver (not Pulumi)", () => {
    test("preflight reports each host's facts", async () => {
        const t0 = Date.now();
        facts = await driver.preflight();
        timings.preflight = (Date.now() - t0) / 1000;
        for (const n of cfg.nodes) {
            const f = facts[n.name];
            expect(f.node).toBe(n.name);
            expect(f.arch).toBe(os.arch() === "arm64" ? "aarch64" : "x86_64");
            expect(f.dockerVersion).toMatch(/^\d+\.\d+/);
            expect(f.gpusSeen).toBe(n.gpus);
        }
    }, 120_000);

    test("preflight with a wrong fabric interface or IP fails naming the host", async () => {
        await expect(driver.preflightNode({ ...worker, fabricInterface: "fabric9" })).rejects.toThrow(
            /preflight failed on node spark-2 \(root@10\.231\.0\.12\): fabric interface fabric9 not found/,
        );
        await expect(driver.preflightNode({ ...worker, fabricIp: "10.232.0.99" })).rejects.toThrow(
            /preflight failed on node spark-2 .*fabric IP 10\.232\.0\.99 is not on interface fabric0 \(has: 10\.232\.0\.12\/24/,
        );
    }, 120_000);

    test("preflight fails naming node and port while another process holds the serve port on the head; passes once it is gone", async () => {
        // the manual deployment's stopped proxy: something that is not this project still listens on the serve port
        const port = cfg.serve.port;
        expect(driver.plan.nodes.find((n) => n.node.name === head.name)?.ports).toContain(port);
        const ours = await dockerOn(ssh(head.name), ["ps", "--quiet", "--filter", `label=${LABEL_PREFIX}managed=true`]);
        expect(ours.code).toBe(0);
        expect(ours.stdout.trim()).toBe(""); // no project container on spark-1 at this point
        expect(await headListens(port)).toBe(false);
        const python = fs.existsSync("/usr/bin/python3") ? "/usr/bin/python3" : "python3";
        const squatter = spawn("ip", ["netns", "exec", HEAD_NETNS, python, "-m", "http.server", String(port), "--bind", head.sshHost], {
            stdio: "ignore",
            detached: true,
        });
        const stop = () => {
            if (squatter.exitCode === null && squatter.signalCode === null && squatter.pid !== undefined) {
                process.kill(-squatter.pid, "SIGKILL");
            }
        };
        try {
            await waitFor(`listener on ${head.sshHost}:${port} in ${HEAD_NETNS}`, () => headListens(port));
            await expect(driver.preflightNode(head)).rejects.toThrow(
                new RegExp(
                    `preflight failed on node spark-1 \\(root@10\\.231\\.0\\.11\\): port ${port} is already in use on the host, ` +
                        `not by this project \\(see who holds it: ss -ltnp 'sport = :${port}'\\)`,
                ),
            );
            // the worker listens on nothing, so it is not affected
            await expect(driver.preflightNode(worker)).resolves.toMatchObject({ node: worker.name });
        } finally {
            stop();
        }
        await waitFor(`listener on port ${port} gone`, async () => !(await headListens(port)));
        await expect(driver.preflightNode(head)).resolves.toMatchObject({ node: head.name });
    }, 120_000);

    test("image provider copies the image spark-1 -> spark-2 (IDs equal); a second diff/create is a no-op", async () => {
        imageIds = await timed("image-copy", () => driver.images());
        expect(imageIds[head.name]).toMatch(/^sha256:[0-9a-f]{64}$/);
        expect(imageIds[worker.name]).toBe(imageIds[head.name]);
        const onWorker = await dockerOn(ssh(worker.name), ["image", "inspect", "--format", "{{.Id}}", cfg.image.ref]);
        expect(onWorker.stdout.trim()).toBe(imageIds[head.name]);

        // the engine's second `up`: diff with the recorded state says nothing changed
        const state = JSON.parse(fs.readFileSync(stateFile, "utf8")) as { images: Record<string, Record<string, unknown>> };
        const olds = state.images[worker.name];
        const news = { ...olds, imageId: undefined };
        const d = await imagePresenceProvider.diff!(`${worker.name}/${cfg.image.ref}`, olds, news);
        expect(d.changes).toBe(false);

        // and create again (e.g. after a lost state) skips the copy: same ID, no image loaded or tagged on spark-2
        await new Promise((r) => setTimeout(r, 1100)); // the first copy's events fall before `since`
        const since = Math.floor(Date.now() / 1000);
        const t0 = Date.now();
        const again = await imagePresenceProvider.create!(news);
        expect((again.outs as { imageId: string }).imageId).toBe(imageIds[head.name]);
        expect(Date.now() - t0).toBeLessThan(15_000);
        const until = Math.floor(Date.now() / 1000) + 1;
        const ev = await dockerOn(ssh(worker.name), [
            "events",
            "--since",
            String(since),
            "--until",
            String(until),
            "--filter",
            "type=image",
            "--format",
            "{{.Action}}",
        ]);
        expect(ev.code).toBe(0);
        expect(ev.stdout.trim()).toBe("");
    }, 900_000);

    test("ray head + worker form a cluster; the probe's fingerprint lists both fabric IPs", async () => {
        up = await timed("up-from-images-to-serving", () => driver.up());
        expect(up.report.nodes).toEqual({ [head.name]: head.fabricIp, [worker.name]: worker.fabricIp });
        expect(up.report.gpus).toBe(cfg.totalGpus);
        expect(up.fingerprint).toMatch(/^[0-9a-f]{16}$/);
        for (const [node, name] of [
            [head.name, "vllm-ray-head"],
            [worker.name, "vllm-ray-worker"],
        ]) {
            const live = await driver.inspectContainer(node, name);
            expect(live?.running).toBe(true);
        }
        timings["up-from-empty-to-serving"] =
            Math.round(((timings["image-copy"] ?? 0) + (timings.preflight ?? 0) + timings["up-from-images-to-serving"]) * 10) / 10;
    }, 900_000);

    test("serve answers: /health 200, chat with the key 200 naming both fabric IPs, 401 without, /metrics vllm: counters", async () => {
        const base = up.endpoint.replace(/\/v1$/, "");
        expect((await request("GET", `${base}/health`)).status).toBe(200);
        const ok = await chat(up, up.apiKey);
        expect(ok.status).toBe(200);
        const answer = JSON.parse(ok.body) as { choices: { message: { content: string } }[] };
        expect(answer.choices[0].message.content).toContain(head.fabricIp);
        expect(answer.choices[0].message.content).toContain(worker.fabricIp);
        expect((await chat(up)).status).toBe(401);
        expect((await chat(up, "wrong-key")).status).toBe(401);
        const metrics = await request("GET", `${base}/metrics`);
        expect(metrics.status).toBe(200);
        expect(metrics.body).toMatch(/^vllm:request_success_total\{.*\} [1-9]/m);
        expect(metrics.body).toMatch(/^vllm:prompt_tokens_total\{.*\} \d+/m);
    }, 120_000);

    test("preflight re-run against the deployed cluster passes: the ports held on the head are its own containers", async () => {
        const r = cfg.ray;
        for (const port of [cfg.serve.port, r.gcsPort, r.dashboardPort, r.clientPort]) {
            expect(await headListens(port)).toBe(true);
        }
        await expect(driver.preflightNode(head)).resolves.toMatchObject({ node: head.name });
    }, 120_000);

    test("the API key is in no container's docker inspect and in no process's command line on the hosts", async () => {
        for (const n of cfg.nodes) {
            const ids = (await dockerOn(ssh(n.name), ["ps", "--all", "--quiet"])).stdout.trim().split("\n").filter(Boolean);
            expect(ids.length).toBeGreaterThan(0);
            const inspect = await dockerOn(ssh(n.name), ["inspect", ...ids]);
            expect(inspect.code).toBe(0);
            expect(inspect.stdout).not.toContain(up.apiKey);
            const ps = await ssh1(n.name, ["ps", "-eo", "pid,args", "--no-headers", "-ww"]);
            expect(ps).toContain("vllm serve"); // one process table (shared by the simulated hosts)
            expect(ps).not.toContain(up.apiKey);
        }
    }, 120_000);

    test("a worker registered with its management IP fails the probe naming the host and the IP; then restored", async () => {
        // The seeds' failure: Ray on the worker took the management address. (Left to auto-detect, Ray picks the
        // address that routes to the head; with the head on the fabric that is the fabric IP, so the management IP
        // is given explicitly here in place of the program's --node-ip-address=<fabric IP>.)
        const args = rayWorkerContainerArgs({
            ...driver.plan.workers[0],
            imageId: imageIds[worker.name],
            headAddress: driver.plan.headAddress,
            headContainerId: up.containerIds["ray-head"],
        });
        const command = (args.command as string[]).map((a) =>
            a.startsWith("--node-ip-address=") ? `--node-ip-address=${worker.sshHost}` : a,
        );
        expect(command).toContain("--node-ip-address=10.231.0.12");
        const argv = dockerRunArgv({ ...args, command });
        const t = ssh(worker.name);
        expect((await dockerOn(t, ["rm", "--force", RAY_WORKER_CONTAINER])).code).toBe(0);
        const run = await runArgv(sshArgv(t, argv), { timeoutMs: 120_000 });
        expect(run.code).toBe(0);

        // The new registration takes a few seconds; until then the probe may still see the removed worker (Ray marks
        // it dead only after its health checks fail). Probe with a short timeout until it fails, bounded to 3 minutes.
        const deadline = Date.now() + 180_000;
        let failure: Error | undefined;
        while (!failure && Date.now() < deadline) {
            failure = await driver.probe(10).then(
                () => undefined,
                (e: Error) => e,
            );
        }
        expect(failure?.message).toMatch(
            /cluster-ready: not ready after 10s: .*hosts registered with a wrong IP: spark-2 registered as 10\.231\.0\.12 instead of its fabric IP/,
        );

        // restore: the driver sees the worker is not the one it created and replaces it (as up --refresh would)
        const restored = await timed("restore-worker", () => driver.up());
        expect(restored.changed).toEqual([`ray-worker-${worker.name}`, "cluster-ready", "serve", "readiness"]);
        expect(restored.containerIds["ray-head"]).toBe(up.containerIds["ray-head"]);
        expect(restored.containerIds[`ray-worker-${worker.name}`]).not.toBe(up.containerIds[`ray-worker-${worker.name}`]);
        expect(restored.report.nodes).toEqual({ [head.name]: head.fabricIp, [worker.name]: worker.fabricIp });
        // a re-formed Ray cluster has a new fingerprint, which replaces serve
        expect(restored.fingerprint).not.toBe(up.fingerprint);
        expect(restored.containerIds.serve).not.toBe(up.containerIds.serve);
        expect((await chat(restored, restored.apiKey)).status).toBe(200);
        up = restored;
    }, 900_000);

    test("a serve-arg change (max model len) replaces only serve; Ray containers stay; the new value is in effect", async () => {
        const before = up;
        const maxLen = (cfg.serve.maxModelLen ?? 4096) / 2;
        driver = new DirectDriver({ ...cfg, serve: { ...cfg.serve, maxModelLen: maxLen } }, STACK, stateFile, log);
        const after = await timed("serve-arg-change-to-serving", () => driver.up());
        expect(after.containerIds.serve).not.toBe(before.containerIds.serve);
        expect(after.containerIds["ray-head"]).toBe(before.containerIds["ray-head"]);
        expect(after.containerIds[`ray-worker-${worker.name}`]).toBe(before.containerIds[`ray-worker-${worker.name}`]);
        expect(after.fingerprint).toBe(before.fingerprint);
        expect(after.changed).toEqual(["serve", "readiness"]);
        const models = await request("GET", `${after.endpoint}/models`, { key: after.apiKey });
        expect(models.status).toBe(200);
        const m = JSON.parse(models.body) as { data: { id: string; max_model_len: number }[] };
        expect(m.data[0].max_model_len).toBe(maxLen);
        const metrics = await request("GET", `${after.endpoint.replace(/\/v1$/, "")}/metrics`);
        expect(metrics.body).toContain(`max_model_len="${maxLen}"`);
        up = after;
    }, 900_000);

    test("destroy leaves no project container on either host", async () => {
        await timed("destroy", () => driver.destroy());
        for (const n of cfg.nodes) {
            expect(await projectContainers(ssh(n.name), STACK)).toEqual([]);
        }
        expect(fs.existsSync(stateFile)).toBe(false);
    }, 300_000);
});

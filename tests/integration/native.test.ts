/**
 * Backend native (vLLM's own multi-node, no Ray) on the simulated hosts spark-1 and spark-2, through the DIRECT
 * DRIVER (not Pulumi: the provider plugins cannot be built here). One vllm-serve per host from the program's own
 * builders: rank 0 on spark-1 serves the API, rank 1 on spark-2 runs --headless and joins rank 0's rendezvous on
 * spark-1's fabric IP; the vLLM stand-in does the rendezvous for real over TCP. Run by tests/integration/run.sh.
 */
import * as fs from "fs";
import * as os from "os";
import * as path from "path";
import { SERVE_CONTAINER, SshTarget, apiKeyHostPath, sshArgv } from "../../components/commands";
import { ClusterConfig } from "../../infra/config";
import { DirectDriver, UpResult, dockerOn, loadStackFile, projectContainers, runArgv } from "./direct";
import { HttpAnswer, ensureStandInModelDir, mergeTimings, request } from "./support";

const STACK = "local-native";
const ROOT = path.join(__dirname, "..", "..");
const work = fs.mkdtempSync(path.join(os.tmpdir(), "vcl-integration-native-"));
const stateFile = path.join(work, "state.json");
const TIMINGS_FILE = process.env.VCL_INTEGRATION_TIMINGS ?? path.join(work, "timings.json");

const timings: Record<string, number> = {};
const logLines: string[] = [];
const log = (m: string) => logLines.push(m);

const cfg: ClusterConfig = loadStackFile(path.join(ROOT, "stacks", `Pulumi.${STACK}.yaml`));
let driver = new DirectDriver(cfg, STACK, stateFile, log);
const head = cfg.head;
const worker = cfg.workers[0];
const ssh = (node: string): SshTarget => driver.plan.nodes.find((n) => n.node.name === node)!.ssh;

function chat(up: UpResult, key?: string): Promise<HttpAnswer> {
    return request("POST", `${up.endpoint}/chat/completions`, {
        key,
        body: { model: cfg.model.servedName, messages: [{ role: "user", content: "hello native cluster" }], max_tokens: 32 },
    });
}

async function timed<T>(name: string, f: () => Promise<T>): Promise<T> {
    const t0 = Date.now();
    const r = await f();
    timings[`native: ${name}`] = Math.round((Date.now() - t0) / 100) / 10;
    return r;
}

/** Polls `f` every second until it returns true, bounded by `ms`. */
async function until(what: string, ms: number, f: () => Promise<boolean>): Promise<void> {
    const deadline = Date.now() + ms;
    while (Date.now() < deadline) {
        if (await f().catch(() => false)) {
            return;
        }
        await new Promise((r) => setTimeout(r, 1000));
    }
    throw new Error(`${what}: not within ${ms / 1000}s`);
}

async function inspect(node: string, format: string): Promise<string> {
    const r = await dockerOn(ssh(node), ["container", "inspect", "--format", format, SERVE_CONTAINER]);
    if (r.code !== 0) {
        throw new Error(`docker inspect ${SERVE_CONTAINER} on ${node}: ${r.stderr.trim()}`);
    }
    return r.stdout.trim();
}

let up: UpResult;

beforeAll(async () => {
    ensureStandInModelDir(cfg);
    // Start from empty: no container of this stack, nor of the ray `local` stack (same hosts, same names).
    await driver.destroy();
    await new DirectDriver(
        loadStackFile(path.join(ROOT, "stacks", "Pulumi.local.yaml")),
        "local",
        path.join(work, "local.json"),
        log,
    ).destroy();
}, 180_000);

afterAll(async () => {
    mergeTimings(TIMINGS_FILE, timings);
    if (process.env.VCL_INTEGRATION_KEEP !== "1") {
        await driver.destroy().catch(() => undefined);
    }
    fs.rmSync(work, { recursive: true, force: true });
    console.log(`direct driver (not Pulumi), backend native, log:\n  ${logLines.join("\n  ")}\ntimings (s): ${JSON.stringify(timings)}`);
}, 180_000);

describe("backend native on simulated hosts via the direct driver (not Pulumi)", () => {
    test("up: one vllm-serve per host (rank 0 on the head, rank 1 headless), no Ray container anywhere", async () => {
        up = await timed("up-to-serving", () => driver.up());
        expect(up.changed).toEqual(expect.arrayContaining(["serve-rank-0", "serve-rank-1", "readiness"]));
        expect(up.changed.some((c) => c.startsWith("ray-") || c === "cluster-ready")).toBe(false);
        expect(up.fingerprint).toMatch(/^[0-9a-f]{16}$/);
        for (const n of cfg.nodes) {
            const all = await projectContainers(ssh(n.name), STACK);
            expect(all.map((c) => c.name)).toEqual([SERVE_CONTAINER]);
            expect(await inspect(n.name, "{{.State.Running}}")).toBe("true");
            const names = (await dockerOn(ssh(n.name), ["ps", "--all", "--format", "{{.Names}}"])).stdout;
            expect(names).not.toMatch(/vllm-ray-/);
        }
        expect(await inspect(head.name, '{{index .Config.Labels "vllm-cluster.node-rank"}}')).toBe("0");
        expect(await inspect(worker.name, '{{index .Config.Labels "vllm-cluster.node-rank"}}')).toBe("1");
        expect(await inspect(worker.name, '{{index .Config.Labels "vllm-cluster.rank0-container-id"}}')).toBe(
            up.containerIds["serve-rank-0"],
        );
        const logs = await dockerOn(ssh(worker.name), ["logs", SERVE_CONTAINER]);
        expect(logs.stdout + logs.stderr).toContain(
            `connected to rank 0 at ${head.fabricIp}:${cfg.native.masterPort} as ${worker.fabricIp}`,
        );
    }, 600_000);

    test("serving: chat with the key 200 naming both fabric IPs, 401 without or with a wrong key", async () => {
        const base = up.endpoint.replace(/\/v1$/, "");
        expect((await request("GET", `${base}/health`)).status).toBe(200);
        const ok = await chat(up, up.apiKey);
        expect(ok.status).toBe(200);
        const content = (JSON.parse(ok.body) as { choices: { message: { content: string } }[] }).choices[0].message.content;
        expect(content).toContain(head.fabricIp);
        expect(content).toContain(worker.fabricIp);
        expect((await chat(up)).status).toBe(401);
        expect((await chat(up, "wrong-key")).status).toBe(401);
    }, 120_000);

    test("the API key is in no container's docker inspect on either host", async () => {
        for (const n of cfg.nodes) {
            const inspectAll = await dockerOn(ssh(n.name), ["inspect", SERVE_CONTAINER]);
            expect(inspectAll.code).toBe(0);
            expect(inspectAll.stdout).not.toContain(up.apiKey);
        }
    }, 60_000);

    test("a second up changes nothing", async () => {
        const again = await timed("no-op-up", () => driver.up());
        expect(again.changed).toEqual([]);
        expect(again.containerIds).toEqual(up.containerIds);
    }, 300_000);

    test("a serve-arg change replaces every rank's serve container and nothing else; the new value is in effect", async () => {
        const maxLen = (cfg.serve.maxModelLen ?? 4096) / 2;
        driver = new DirectDriver({ ...cfg, serve: { ...cfg.serve, maxModelLen: maxLen } }, STACK, stateFile, log);
        const after = await timed("serve-arg-change-to-serving", () => driver.up());
        expect(after.changed).toEqual(["serve-rank-0", "serve-rank-1", "readiness"]);
        expect(after.containerIds["serve-rank-0"]).not.toBe(up.containerIds["serve-rank-0"]);
        expect(after.containerIds["serve-rank-1"]).not.toBe(up.containerIds["serve-rank-1"]);
        expect(after.imageIds).toEqual(up.imageIds);
        const models = await request("GET", `${after.endpoint}/models`, { key: after.apiKey });
        expect((JSON.parse(models.body) as { data: { max_model_len: number }[] }).data[0].max_model_len).toBe(maxLen);
        expect((await chat(after, after.apiKey)).status).toBe(200);
        up = after;
    }, 600_000);

    test("a headless rank that goes away: rank 0's /health turns 503 and it exits non-zero; up heals both", async () => {
        const base = up.endpoint.replace(/\/v1$/, "");
        expect((await dockerOn(ssh(worker.name), ["stop", "--time", "5", SERVE_CONTAINER])).code).toBe(0);
        await timed("rank-loss-to-503", () =>
            until("rank 0 /health 503", 30_000, async () => (await request("GET", `${base}/health`, { timeoutMs: 3000 })).status === 503),
        );
        // the engine death ends the process with exit code 1; docker's on-failure policy restarts it (bounded)
        await until(
            "rank 0 exited non-zero and was restarted",
            60_000,
            async () => Number(await inspect(head.name, "{{.RestartCount}}")) >= 1,
        );
        const logs = await dockerOn(ssh(head.name), ["logs", SERVE_CONTAINER]);
        expect(logs.stdout + logs.stderr).toMatch(
            /engine dead: a headless rank is gone .*headless node rank 1 \(10\.232\.0\.12\) disconnected/,
        );

        const healed = await timed("heal-up-to-serving", () => driver.up());
        expect(healed.changed).toContain("serve-rank-1");
        expect(healed.changed).toContain("readiness");
        expect((await chat(healed, healed.apiKey)).status).toBe(200);
        up = healed;
    }, 600_000);

    test("destroy leaves no project container on either host and no key file on the head", async () => {
        await timed("destroy", () => driver.destroy());
        for (const n of cfg.nodes) {
            expect(await projectContainers(ssh(n.name), STACK)).toEqual([]);
        }
        expect(fs.existsSync(stateFile)).toBe(false);
        const key = await runArgv(sshArgv(ssh(head.name), ["test", "-e", apiKeyHostPath(cfg.stateDir, head.name)]), { timeoutMs: 30_000 });
        expect(key.code).toBe(1);
    }, 300_000);
});

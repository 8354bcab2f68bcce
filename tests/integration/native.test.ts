/**
 * The `local-native` stack (backend native: vLLM's own multi-node, no Ray; rank 0 on spark-1 serves the API, rank 1
 * on spark-2 runs --headless and joins rank 0's rendezvous on spark-1's fabric IP) deployed on the simulated hosts
 * by the real Pulumi engine through the Automation API. The model is on spark-1 only (model.source): the program
 * copies it to spark-2 along its model chain. Run by tests/integration/run.sh.
 */
import * as path from "path";
import { apiKeyHostPath } from "../../infra/builders/node";
import { shellQuote } from "../../infra/builders/quote";
import { CONTAINER, LABEL } from "../../infra/contract";
import { serveArgsCheckCommand } from "../../infra/builders/serveArgsCheck";
import { serveArgsCheckProvider } from "../../infra/providers/serveArgsCheck";
import { Project, changed, destroy, editConfig, expectOk, openProject, preview, removeProject, stateResources, up } from "./engine";
import { Hosts, stackConfig } from "./hosts";
import { Answer, greedyAnswer, tp1Reference } from "./reference";
import { chat, completionTokens, ensureServing, mergeTimings, request } from "./support";

const STACK = "local-native";
const TIMINGS_FILE = process.env.VCL_INTEGRATION_TIMINGS;
const timings: Record<string, number> = {};

let p: Project;
let hosts: Hosts;
let endpoint = "";
let apiKey = "";
let model = "";
let tp1: Answer;
const head = "spark-1";
const worker = "spark-2";

beforeAll(async () => {
    p = await openProject(STACK, "vcl-it-native-");
    hosts = new Hosts(stackConfig(p.stackFile));
    model = hosts.cfg.model.servedName;
    // Start from empty: no container of any project stack on the two hosts (the ray stack uses the same names).
    for (const n of [head, worker]) {
        await hosts.removeProjectContainers(n);
    }
    await modelOnSourceOnly();
    tp1 = await tp1Reference(hosts); // computed once per image and model (the ray file may have done it already)
}, 900_000);

/**
 * model.source's starting point, as a downloaded Hugging Face cache leaves it: the stack's model (and its -hd16
 * variant) on spark-1 only, every file a symbolic link into a blob directory; spark-2 has no model directory at all.
 */
async function modelOnSourceOnly(): Promise<void> {
    const own = path.posix.dirname(hosts.cfg.model.hostPath); // <testbed>/own/models: each host's own
    const shared = own.replace(/\/own\/models$/, "/models"); // where the testbed installs the models, seen by all
    const name = path.posix.basename(hosts.cfg.model.hostPath);
    const script = [
        "set -eu",
        `own=${shellQuote(own)} shared=${shellQuote(shared)}`,
        'rm -rf "$own" && mkdir -p "$own"',
        `for m in ${shellQuote(name)} ${shellQuote(`${name}-hd16`)}; do`,
        '  mkdir -p "$own/$m/.blobs"',
        '  for f in "$shared/$m"/*; do',
        '    [ -f "$f" ] || { echo "$f is not a file" >&2; exit 1; }',
        '    sum=$(sha256sum "$f" | cut -d" " -f1)',
        '    cp "$f" "$own/$m/.blobs/$sum" && ln -sfn ".blobs/$sum" "$own/$m/$(basename "$f")"',
        "  done",
        "done",
    ].join("\n");
    await hosts.must(head, ["bash", "-c", script]);
    await hosts.must(worker, ["rm", "-rf", own]);
}

async function modelChain(): Promise<{ digest: string; copied: string[]; digests: Record<string, string> }> {
    const r = (await stateResources(p)).find((x) => x.name === "model-chain");
    if (!r) throw new Error("no model-chain in the stack's state");
    return r.outputs as { digest: string; copied: string[]; digests: Record<string, string> };
}

afterAll(async () => {
    if (TIMINGS_FILE) {
        mergeTimings(TIMINGS_FILE, Object.fromEntries(Object.entries(timings).map(([k, v]) => [`native: ${k}`, v])));
    }
    if (p) {
        if (process.env.VCL_INTEGRATION_KEEP !== "1") {
            await destroy(p);
        }
        removeProject(p);
    }
}, 600_000);

/** Every test after the first converging up starts from a serving cluster, whatever the test before it left. */
async function serving(): Promise<void> {
    ({ endpoint, apiKey } = await ensureServing(p, model, { endpoint, apiKey }));
}

describe("backend native on the simulated hosts through the real Pulumi engine", () => {
    test("up: one vllm-serve per host (rank 0 on the head, rank 1 headless), no Ray container anywhere", async () => {
        const r = expectOk(await up(p));
        timings["up-to-serving"] = Math.round(r.seconds * 10) / 10;
        endpoint = r.outputs.endpoint as string;
        apiKey = r.outputs.apiKey as string;
        expect(changed(r)).toEqual(
            expect.arrayContaining(["create serve-rank-0-container", "create serve-rank-1-container", "create serve-readiness"]),
        );
        expect(Object.keys(r.ops).some((n) => n.startsWith("ray-") || n.startsWith("cluster-ready"))).toBe(false);
        expect(r.outputs.rayDashboard).toMatch(/^none/);
        for (const n of [head, worker]) {
            expect(await hosts.projectContainers(n, STACK)).toEqual([`${CONTAINER.serve} running`]);
        }
        expect(await hosts.inspect(head, CONTAINER.serve, '{{index .Config.Labels "vllm-cluster.node-rank"}}')).toBe("0");
        expect(await hosts.inspect(worker, CONTAINER.serve, '{{index .Config.Labels "vllm-cluster.node-rank"}}')).toBe("1");
        expect(await hosts.inspect(worker, CONTAINER.serve, '{{index .Config.Labels "vllm-cluster.rank0-container-id"}}')).toBe(
            await hosts.containerId(head, CONTAINER.serve),
        );
        expect(await hosts.inspect(worker, CONTAINER.serve, "{{range .Config.Env}}{{println .}}{{end}}")).toContain(
            `VLLM_HOST_IP=${hosts.node(worker).fabricIp}`,
        );
    }, 1_800_000);

    test("model.source: spark-2 got spark-1's model as regular files, checked file by file; both ranks carry its digest", async () => {
        await serving();
        const chain = await modelChain();
        expect(chain.copied).toEqual([worker]);
        expect(chain.digest).toMatch(/^sha256:[0-9a-f]{64}$/);
        expect(chain.digests).toEqual({ [worker]: chain.digest });
        const dir = hosts.cfg.model.hostPath;
        const onSource = await hosts.modelFiles(head);
        expect(onSource).toContain("model.safetensors");
        // the same content behind the same paths (.blobs included); on spark-2 no link is left, on spark-1 all are
        expect(await hosts.modelFiles(worker)).toBe(onSource);
        expect(await hosts.must(worker, ["find", dir, "-type", "l"])).toBe("");
        expect(await hosts.must(head, ["find", dir, "-maxdepth", "1", "-type", "f"])).toBe("");
        for (const n of [head, worker]) {
            expect(await hosts.inspect(n, CONTAINER.serve, `{{index .Config.Labels "${LABEL.modelDigest}"}}`)).toBe(chain.digest);
        }
    }, 120_000);

    test("serving: chat with the key 200, 401 without or with a wrong key", async () => {
        await serving();
        expect((await request("GET", `${endpoint.replace(/\/v1$/, "")}/health`)).status).toBe(200);
        const ok = await chat(endpoint, model, apiKey);
        expect(ok.status).toBe(200);
        expect(completionTokens(ok)).toBeGreaterThan(0);
        expect((await chat(endpoint, model)).status).toBe(401);
        expect((await chat(endpoint, model, "wrong-key")).status).toBe(401);
    }, 300_000);

    test("TP 2 across the two hosts (vLLM's own multi-node) generates exactly the tokens of TP 1 on one host, greedy", async () => {
        await serving();
        const tp2 = await greedyAnswer(endpoint, model, apiKey);
        expect(tp2.completion).toHaveLength(16);
        expect(tp2.completion).toEqual(tp1.completion);
        expect(tp2.chat).toBe(tp1.chat);
    }, 300_000);

    test("the API key is in no container's docker inspect on either host, and the headless rank has no key file mount", async () => {
        await serving();
        for (const n of [head, worker]) {
            expect(await hosts.must(n, ["docker", "inspect", CONTAINER.serve])).not.toContain(apiKey);
        }
        expect(await hosts.inspect(worker, CONTAINER.serve, "{{json .Mounts}}")).not.toContain("api-key");
    }, 120_000);

    test("a second up changes nothing", async () => {
        await serving();
        const r = expectOk(await up(p, { expectNoChanges: true }));
        timings["no-op-up"] = Math.round(r.seconds * 10) / 10;
        expect(changed(r)).toEqual([]);
    }, 600_000);

    test("a weight file damaged on spark-2: up --refresh sends that file back, and the serving ranks keep running", async () => {
        await serving();
        const dir = hosts.cfg.model.hostPath;
        const good = await hosts.modelFiles(worker);
        const ranks = [await hosts.containerId(head, CONTAINER.serve), await hosts.containerId(worker, CONTAINER.serve)];
        await hosts.must(worker, ["sh", "-c", `printf damaged > ${shellQuote(`${dir}/model.safetensors`)}`]);
        expect(await hosts.modelFiles(worker)).not.toBe(good);
        const r = expectOk(await up(p, { refresh: true }));
        timings["damaged-model-file-healed"] = Math.round(r.seconds * 10) / 10;
        expect(changed(r)).toEqual(["update model-chain"]);
        expect(await hosts.modelFiles(worker)).toBe(good);
        expect((await modelChain()).copied).toEqual([worker]);
        // the source's content, so its digest, did not change: nothing that mounts the model restarts
        expect([await hosts.containerId(head, CONTAINER.serve), await hosts.containerId(worker, CONTAINER.serve)]).toEqual(ranks);
    }, 600_000);

    test("each rank's command is checked by the image's own vLLM on its host: the headless rank's refusal names spark-2; the ranks keep serving", async () => {
        await serving();
        const state = await stateResources(p);
        // the four checks (each rank's deployed command, and the same with a flag vLLM does not have) run at once:
        // each is a vLLM start-up on the rank's host, mostly waiting on its own imports
        const ranks = [
            [0, head],
            [1, worker],
        ] as const;
        const checked = await Promise.all(
            ranks.map(async ([rank, node]) => {
                const deployed = state.find((r) => r.name === `serve-rank-${rank}-args-check`);
                if (!deployed) throw new Error(`no serve-rank-${rank}-args-check in the state`);
                const inputs = deployed.outputs as Record<string, unknown> & { command: string[]; node: string };
                // the recorded check names its script relative to where the engine ran the program: made here instead
                const checkScript = serveArgsCheckCommand(hosts.target(node), node, String(inputs.image));
                const [ok, bad] = await Promise.all([
                    serveArgsCheckProvider.check!(undefined, { ...inputs, checkScript, vllm: undefined }),
                    serveArgsCheckProvider.check!(undefined, {
                        ...inputs,
                        checkScript,
                        command: [...inputs.command, "--no-such-flag"],
                        vllm: undefined,
                    }),
                ]);
                return { rank, node, inputs, ok, bad };
            }),
        );
        for (const { rank, node, inputs, ok, bad } of checked) {
            expect(inputs.node).toBe(node);
            if (rank === 1) expect(inputs.command).toContain("--headless");
            expect(ok.failures ?? []).toEqual([]);
            expect(ok.inputs.vllm).toBe("0.32.0");
            expect(bad.failures).toHaveLength(1);
            expect(bad.failures![0].reason).toContain(`serve would not start on node ${node}: --no-such-flag is not a flag of vLLM 0.32.0`);
        }
        expect((await chat(endpoint, model, apiKey)).status).toBe(200);
    }, 300_000);

    test("a serve argument change replaces every rank and the readiness check, nothing else; the value is in effect", async () => {
        await serving();
        const before = [await hosts.containerId(head, CONTAINER.serve), await hosts.containerId(worker, CONTAINER.serve)];
        const maxLen = hosts.cfg.serve.maxModelLen! / 2;
        editConfig(p, (c) => ((c.serve as Record<string, unknown>).maxModelLen = maxLen));
        const pv = expectOk(await preview(p, { diff: true }));
        expect(changed(pv)).toEqual([
            "replace serve-rank-0-container",
            "replace serve-rank-1-container",
            "update serve-rank-0-args-check",
            "update serve-rank-1-args-check",
            "update serve-readiness",
        ]);
        const r = expectOk(await up(p));
        timings["serve-arg-change-to-serving"] = Math.round(r.seconds * 10) / 10;
        expect(changed(r)).toEqual([
            "replace serve-rank-0-container",
            "replace serve-rank-1-container",
            "update serve-rank-0-args-check",
            "update serve-rank-1-args-check",
            "update serve-readiness",
        ]);
        const after = [await hosts.containerId(head, CONTAINER.serve), await hosts.containerId(worker, CONTAINER.serve)];
        expect(after[0]).not.toBe(before[0]);
        expect(after[1]).not.toBe(before[1]);
        const models = await request("GET", `${endpoint}/models`, { key: apiKey });
        expect((JSON.parse(models.body) as { data: { max_model_len: number }[] }).data[0].max_model_len).toBe(maxLen);
    }, 1_800_000);

    test("a model the CPU kernels cannot run answers /health but fails readiness: up fails naming the completion, then converges", async () => {
        await serving();
        // head_dim 16: vLLM's CPU attention has no kernel for it; the server starts, answers /health, and fails the
        // first real request (tests/testbed/selftest.sh shows the same by hand). /health alone would call it ready.
        const good = hosts.cfg.model.hostPath;
        editConfig(p, (c) => ((c.model as Record<string, unknown>).hostPath = `${good}-hd16`));
        const r = await up(p);
        timings["unrunnable-model-up-fails"] = Math.round(r.seconds * 10) / 10;
        expect(r.ok).toBe(false);
        expect(r.output + r.error).toMatch(/vllm-serve on node spark-1: chat completion (returned HTTP 5\d\d|request failed)/);
        expect(r.seconds).toBeLessThan(hosts.cfg.serve.readyTimeoutSeconds + 120);

        expect(await hosts.modelFiles(worker, `${good}-hd16`)).toBe(await hosts.modelFiles(head, `${good}-hd16`)); // it was copied

        editConfig(p, (c) => ((c.model as Record<string, unknown>).hostPath = good));
        const fixed = expectOk(await up(p));
        timings["fixed-model-to-serving"] = Math.round(fixed.seconds * 10) / 10;
        expect((await chat(endpoint, model, apiKey)).status).toBe(200);
        expect((await modelChain()).copied).toEqual([]); // spark-2 still held it: nothing sent
    }, 1_800_000);

    test("destroy leaves no project container on either host and no key file on the head", async () => {
        const r = expectOk(await destroy(p));
        timings.destroy = Math.round(r.seconds * 10) / 10;
        for (const n of [head, worker]) {
            expect(await hosts.projectContainers(n, STACK)).toEqual([]);
        }
        expect((await hosts.on(head, ["test", "-e", apiKeyHostPath(hosts.cfg.stateDir, head)])).code).toBe(1);
        expect(await stateResources(p)).toEqual([]);
    }, 600_000);
});

/**
 * Adding a host to the `local` stack and removing it again, through the real engine on three simulated hosts
 * (backend ray). The model is tiny-qwen2-h6 (six heads, so tensor parallel 2 and 3 both divide it). Each `up`
 * must converge by itself: only the host's own resources and what depends on the host list change, and a removed
 * host's Ray worker is gone before the gate looks again (the Roster clears it; the engine alone would delete it
 * only after the new gate had failed on the extra node).
 */
import { CONTAINER } from "../../infra/contract";
import { OpResult, Project, destroy, editConfig, expectOk, openProject, removeProject, up } from "./engine";
import { Hosts, runArgv, stackConfig } from "./hosts";
import { chat, mergeTimings } from "./support";

const STACK = "local";
const TIMINGS_FILE = process.env.VCL_INTEGRATION_TIMINGS;
const timings: Record<string, number> = {};
let p: Project;
let hosts: Hosts;
let endpoint = "";
let apiKey = "";
const third = { name: "spark-3", sshHost: "10.231.0.13", fabricIp: "10.232.0.13" };

/** What belongs to spark-3 alone: created when it joins, deleted when it leaves. */
const SPARK3_OWN = [
    "image-spark-3",
    "ray-worker-spark-3",
    "ray-worker-spark-3-container",
    "spark-3",
    "spark-3-preflight",
    "spark-3-ray-token-file",
];
/** What depends on the host list: re-checked and restarted on either change. */
/**
 * What a change of the host list touches on the hosts that stay: the gate and serve, the chain's and the roster's
 * member lists, and each staying host's preflight, which checks that it reaches every other host's sshd on the fabric.
 */
const HOST_LIST_DEPENDENTS = {
    replace: ["serve-container"],
    // serve-args-check: the new command (tensor parallel 3 or 2) is checked by the image's vLLM before serve is replaced
    update: [
        "cluster-ready-probe",
        "image-chain",
        "roster",
        "serve-args-check",
        "serve-readiness",
        "spark-1-preflight",
        "spark-2-preflight",
    ],
};

type RawNode = Record<string, unknown> & { name: string; env: Record<string, string> };

/** Resource names by engine step, without `skip` (e.g. "same"). */
function opsExcept(r: OpResult, skip: string): Record<string, string[]> {
    const by: Record<string, string[]> = {};
    for (const [name, op] of Object.entries(r.ops)) {
        if (op !== skip) (by[op] ??= []).push(name);
    }
    for (const names of Object.values(by)) names.sort();
    return by;
}

async function serving(): Promise<number> {
    return (await chat(endpoint, hosts.cfg.model.servedName, apiKey)).status;
}

beforeAll(async () => {
    const r = await runArgv(["tests/testbed/testbed", "up", "3"], { timeoutMs: 1_200_000 });
    if (r.code !== 0) throw new Error(`testbed up 3: ${r.stderr}`);
    p = await openProject(STACK, "vcl-scale-");
    editConfig(p, (c) => {
        const model = c.model as Record<string, unknown>;
        model.hostPath = `${model.hostPath}-h6`;
    });
    hosts = new Hosts(stackConfig(p.stackFile));
    // start from no project container on any of the three hosts (spark-2 keeps its image: not what is measured)
    for (const i of [1, 2, 3]) {
        await runArgv(
            [
                "sh",
                "-c",
                `ids=$(docker -H unix:///run/vcl-h${i}/docker.sock ps -aq --filter label=vllm-cluster.managed=true); [ -z "$ids" ] || docker -H unix:///run/vcl-h${i}/docker.sock rm -f $ids`,
            ],
            { timeoutMs: 120_000 },
        );
    }
    const first = expectOk(await up(p));
    endpoint = String(first.outputs.endpoint);
    apiKey = String(first.outputs.apiKey);
    expect(await serving()).toBe(200);
}, 1_200_000);

afterAll(async () => {
    if (TIMINGS_FILE) mergeTimings(TIMINGS_FILE, timings);
    if (p) {
        await destroy(p);
        removeProject(p);
    }
}, 600_000);

test("adding spark-3 (TP 2 -> 3): its host, image, token file and worker are created; the gate, roster and serve follow; Ray keeps its containers", async () => {
    const before = [await hosts.containerId("spark-1", CONTAINER.rayHead), await hosts.containerId("spark-2", CONTAINER.rayWorker)];
    editConfig(p, (c) => {
        const nodes = c.nodes as RawNode[];
        // a third core binding: two cores, three ranks
        nodes.push({ ...nodes[1], ...third, env: { ...nodes[1].env, OMP_PLACES: "{0}" } });
        (c.serve as Record<string, unknown>).tensorParallelSize = 3;
    });
    const r = expectOk(await up(p));
    timings["scale: add a host"] = Math.round(r.seconds * 10) / 10;
    expect(opsExcept(r, "same")).toEqual({
        create: SPARK3_OWN,
        ...HOST_LIST_DEPENDENTS,
    });
    expect([await hosts.containerId("spark-1", CONTAINER.rayHead), await hosts.containerId("spark-2", CONTAINER.rayWorker)]).toEqual(
        before,
    );
    expect(await serving()).toBe(200);
}, 1_200_000);

test("removing spark-3 again converges in one up: its worker is cleared before the gate looks, nothing of the stack is left on it", async () => {
    // the state this test starts from: a serving three-host cluster (the previous test's result), checked first
    const state = (await p.stack.exportStack()).deployment.resources ?? [];
    if (!state.some((r: { urn: string }) => r.urn.endsWith("::ray-worker-spark-3-container")) || (await serving()) !== 200) {
        throw new Error("the three-host cluster is not serving after the previous test (no spark-3 worker in the state, or no completion)");
    }
    editConfig(p, (c) => {
        (c.nodes as RawNode[]).pop();
        (c.serve as Record<string, unknown>).tensorParallelSize = 2;
    });
    const r = expectOk(await up(p));
    timings["scale: remove a host"] = Math.round(r.seconds * 10) / 10;
    expect(opsExcept(r, "same")).toEqual({
        delete: SPARK3_OWN,
        ...HOST_LIST_DEPENDENTS,
    });
    expect(await hosts.projectContainers("spark-1", STACK)).toEqual(["vllm-ray-head running", "vllm-serve running"]);
    const left = await runArgv([
        "docker",
        "-H",
        "unix:///run/vcl-h3/docker.sock",
        "ps",
        "-aq",
        "--filter",
        `label=vllm-cluster.stack=${STACK}`,
    ]);
    expect(left.stdout.trim()).toBe("");
    expect(await serving()).toBe(200);
}, 1_200_000);

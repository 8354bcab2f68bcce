/**
 * One `local` stack on the simulated hosts through the real Pulumi engine, first with image.build, then growing by a
 * host and shrinking again (one cold up for both: the scale cases go on from the built image's serving cluster).
 *
 * image.build: a small image derived from the test image (no network: FROM the image spark-1 already holds) is built
 * by spark-1's own Docker engine over the node's ssh:// connection (the Docker provider's Image), copied to spark-2
 * along the chain, and served. A second up does nothing; a one-line change to the context rebuilds it and replaces
 * only what uses the image; a failing build fails the up with the build's words and replaces nothing.
 *
 * Adding a host and removing it again (backend ray, three simulated hosts). The model is tiny-qwen2-h6 (six heads,
 * so tensor parallel 2 and 3 both divide it). Each `up` must converge by itself: only the host's own resources and
 * what depends on the host list change, and a removed host's Ray worker is gone before the gate looks again (the
 * Roster clears it; the engine alone would delete it only after the new gate had failed on the extra node).
 *
 * Run by tests/integration/run.sh.
 */
import * as fs from "fs";
import * as path from "path";
import { CONTAINER } from "../../infra/contract";
import {
    OpResult,
    Project,
    changed,
    destroy,
    editConfig,
    expectOk,
    openProject,
    preview,
    removeProject,
    stepSeconds,
    up,
    withoutMonitoring,
} from "./engine";
import { Hosts, runArgv, stackConfig } from "./hosts";
import { chat, completionTokens, mergeTimings } from "./support";

const TIMINGS_FILE = process.env.VCL_INTEGRATION_TIMINGS;

const STACK = "local";
const REF = "vllm-cluster-derived:test";
const [head, worker] = ["spark-1", "spark-2"];

let p: Project;
let hosts: Hosts;
let context: string;
let model = "";

function writeContext(marker: string, extra = ""): void {
    fs.writeFileSync(
        path.join(context, "Dockerfile"),
        [
            "# A derived image for the test: the testbed's vLLM image plus one file and a label (no network needed).",
            "ARG BASE=vllm-cluster-testbed:latest",
            "FROM ${BASE}",
            "ARG FLAVOUR=plain",
            "COPY marker.txt /opt/vllm-cluster-derived/marker.txt",
            'LABEL vllm-cluster.test.flavour="${FLAVOUR}"',
            extra,
            "",
        ].join("\n"),
    );
    fs.writeFileSync(path.join(context, "marker.txt"), `${marker}\n`);
}

/** The containers of the stack on a host, as `name id`. */
async function containerIds(node: string): Promise<Record<string, string>> {
    const out: Record<string, string> = {};
    for (const c of [CONTAINER.rayHead, CONTAINER.rayWorker, CONTAINER.serve]) {
        const id = await hosts.containerId(node, c).catch(() => "");
        if (id) out[c] = id;
    }
    return out;
}

const third = { name: "spark-3", sshHost: "10.231.0.13", fabricIp: "10.232.0.13" };
/** A simulated host's engine socket, from the machine (spark-N is vcl-hN). */
const dockerOf = (n: string) => `unix:///run/vcl-h${n.slice(-1)}/docker.sock`;

/** What belongs to spark-3 alone: created when it joins, deleted when it leaves. */
const SPARK3_OWN = [
    "image-spark-3",
    "ray-worker-spark-3",
    "ray-worker-spark-3-container",
    "spark-3",
    "spark-3-preflight",
    "spark-3-ray-token-file",
];
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

let endpoint = "";
let apiKey = "";
async function serving(): Promise<number> {
    return (await chat(endpoint, model, apiKey)).status;
}

beforeAll(async () => {
    // the third host the scale cases add (up 3 never stops hosts 4+ that other files may have started)
    const tb = await runArgv(["tests/testbed/testbed", "up", "3"], { timeoutMs: 1_200_000 });
    if (tb.code !== 0) throw new Error(`testbed up 3: ${tb.stderr}`);
    p = await openProject(STACK, "vcl-it-build-");
    withoutMonitoring(p);
    // inside the project (the config refuses a context outside it): the project copy's own directory
    context = path.join(p.dir, "build-context");
    fs.mkdirSync(context);
    writeContext("one");
    editConfig(p, (c) => {
        // six heads: tensor parallel 2 here, 3 once spark-3 joins
        const m = c.model as Record<string, unknown>;
        m.hostPath = `${m.hostPath}-h6`;
        c.image = { ...(c.image as object), ref: REF, build: { context: "build-context", args: { FLAVOUR: "derived" } } };
    });
    hosts = new Hosts(stackConfig(p.stackFile));
    model = hosts.cfg.model.servedName;
    // start from no project container on any of the three hosts, and no built image on any
    for (const n of [head, worker, third.name]) {
        await runArgv(
            [
                "sh",
                "-c",
                `ids=$(docker -H ${dockerOf(n)} ps -aq --filter label=vllm-cluster.managed=true); [ -z "$ids" ] || docker -H ${dockerOf(n)} rm -f $ids; docker -H ${dockerOf(n)} image rm --force ${REF} >/dev/null 2>&1; true`,
            ],
            { timeoutMs: 120_000 },
        );
    }
}, 600_000);

afterAll(async () => {
    if (p) {
        if (process.env.VCL_INTEGRATION_KEEP !== "1") await destroy(p);
        removeProject(p);
    }
}, 600_000);

describe("image.build: built on the source host, distributed, served", () => {
    let first: Record<string, Record<string, string>> = {};

    test("up builds on spark-1 through its engine, copies to spark-2, and serves from the built image", async () => {
        const pre = expectOk(await preview(p));
        expect(changed(pre)).toContain("create image-build");
        expect(await hosts.imageId(head, REF)).toBe(""); // a preview builds nothing
        const r = expectOk(await up(p));
        expect(changed(r)).toContain("create image-build");
        const seconds = stepSeconds(r, "image-build");
        expect(seconds).toBeGreaterThan(0);
        if (TIMINGS_FILE) mergeTimings(TIMINGS_FILE, { "image.build: cold build on spark-1": seconds });
        const built = await hosts.imageId(head, REF);
        expect(built).toMatch(/^sha256:/);
        expect(await hosts.imageId(worker, REF)).toBe(built);
        for (const n of [head, worker]) {
            expect(
                await hosts.must(n, [
                    "docker",
                    "image",
                    "inspect",
                    "--format",
                    '{{index .Config.Labels "vllm-cluster.test.flavour"}}',
                    REF,
                ]),
            ).toBe("derived\n");
            expect(await hosts.inspect(n, n === head ? CONTAINER.rayHead : CONTAINER.rayWorker, "{{.Image}}")).toBe(built);
        }
        expect(
            (await hosts.must(head, ["docker", "run", "--rm", "--entrypoint", "cat", REF, "/opt/vllm-cluster-derived/marker.txt"])).trim(),
        ).toBe("one");
        endpoint = String(r.outputs.endpoint);
        apiKey = String(r.outputs.apiKey);
        const ok = await chat(endpoint, model, apiKey);
        expect(ok.status).toBe(200);
        expect(completionTokens(ok)).toBeGreaterThan(0);
        first = { [head]: await containerIds(head), [worker]: await containerIds(worker) };
    }, 1_800_000);

    test("a second up does nothing (no rebuild, no copy)", async () => {
        const r = expectOk(await up(p));
        expect(changed(r)).toEqual([]);
    }, 900_000);

    test("a one-line change to the context: the preview says rebuild; up rebuilds and replaces only what uses the image", async () => {
        writeContext("two");
        const pre = expectOk(await preview(p, { diff: true }));
        expect(changed(pre)).toEqual(expect.arrayContaining(["update image-build", "update image-chain", "update image-spark-1"]));
        const r = expectOk(await up(p));
        const ops = changed(r);
        expect(ops).toEqual(expect.arrayContaining(["update image-build", "update image-chain"]));
        // what changed is the image, its copies and checks, and the containers made from it; nothing else
        for (const op of ops) {
            expect(op).toMatch(
                /^(update image-|replace .*container|update (serve-readiness|serve-args-check|cluster-ready-probe|ray-gate))/,
            );
        }
        const rebuilt = await hosts.imageId(head, REF);
        expect(await hosts.imageId(worker, REF)).toBe(rebuilt);
        expect(
            (
                await hosts.must(worker, ["docker", "run", "--rm", "--entrypoint", "cat", REF, "/opt/vllm-cluster-derived/marker.txt"])
            ).trim(),
        ).toBe("two");
        for (const n of [head, worker]) {
            const now = await containerIds(n);
            for (const [c, id] of Object.entries(now)) expect(id).not.toBe(first[n][c]);
        }
        const ok = await chat(r.outputs.endpoint as string, model, r.outputs.apiKey as string);
        expect(ok.status).toBe(200);
    }, 1_800_000);

    test("a failing build fails up with the build's own words, and nothing running is replaced", async () => {
        const before = { [head]: await containerIds(head), [worker]: await containerIds(worker) };
        const imageBefore = await hosts.imageId(head, REF);
        writeContext("three", "RUN echo 'the build step that fails' && exit 7");
        const r = await up(p);
        expect(r.ok).toBe(false);
        const log = `${r.output}\n${r.error ?? ""}`;
        expect(log).toMatch(/the build step that fails/);
        expect(log).toMatch(/returned a non-zero code: 7|exit code: 7/);
        expect(await hosts.imageId(head, REF)).toBe(imageBefore);
        for (const n of [head, worker]) expect(await containerIds(n)).toEqual(before[n]);
        writeContext("two");
    }, 1_800_000);
});

// The same stack, serving from the image it built (context "two"), grows by a host and shrinks again.
describe("hosts added and removed on the same stack", () => {
    test("adding spark-3 (TP 2 -> 3): its host, image, token file and worker are created; the gate, roster and serve follow; Ray keeps its containers", async () => {
        expect(await serving()).toBe(200);
        const before = [await hosts.containerId(head, CONTAINER.rayHead), await hosts.containerId(worker, CONTAINER.rayWorker)];
        editConfig(p, (c) => {
            const nodes = c.nodes as RawNode[];
            // a third core binding: two cores, three ranks
            nodes.push({ ...nodes[1], ...third, env: { ...nodes[1].env, OMP_PLACES: "{0}" } });
            (c.serve as Record<string, unknown>).tensorParallelSize = 3;
        });
        const r = expectOk(await up(p));
        if (TIMINGS_FILE) mergeTimings(TIMINGS_FILE, { "scale: add a host": Math.round(r.seconds * 10) / 10 });
        expect(opsExcept(r, "same")).toEqual({
            create: SPARK3_OWN,
            ...HOST_LIST_DEPENDENTS,
        });
        expect([await hosts.containerId(head, CONTAINER.rayHead), await hosts.containerId(worker, CONTAINER.rayWorker)]).toEqual(before);
        // spark-3 got the built image, the same one
        const onThird = await runArgv(["docker", "-H", dockerOf(third.name), "image", "inspect", "--format", "{{.Id}}", REF]);
        expect(onThird.stdout.trim()).toBe(await hosts.imageId(head, REF));
        expect(await serving()).toBe(200);
    }, 1_200_000);

    test("removing spark-3 again converges in one up: its worker is cleared before the gate looks, nothing of the stack is left on it", async () => {
        // the state this test starts from: a serving three-host cluster (the previous test's result), checked first
        const state = (await p.stack.exportStack()).deployment.resources ?? [];
        if (!state.some((r: { urn: string }) => r.urn.endsWith("::ray-worker-spark-3-container")) || (await serving()) !== 200) {
            throw new Error(
                "the three-host cluster is not serving after the previous test (no spark-3 worker in the state, or no completion)",
            );
        }
        editConfig(p, (c) => {
            (c.nodes as RawNode[]).pop();
            (c.serve as Record<string, unknown>).tensorParallelSize = 2;
        });
        const r = expectOk(await up(p));
        if (TIMINGS_FILE) mergeTimings(TIMINGS_FILE, { "scale: remove a host": Math.round(r.seconds * 10) / 10 });
        expect(opsExcept(r, "same")).toEqual({
            delete: SPARK3_OWN,
            ...HOST_LIST_DEPENDENTS,
        });
        expect(await hosts.projectContainers(head, STACK)).toEqual(["vllm-ray-head running", "vllm-serve running"]);
        const left = await runArgv(["docker", "-H", dockerOf(third.name), "ps", "-aq", "--filter", `label=vllm-cluster.stack=${STACK}`]);
        expect(left.stdout.trim()).toBe("");
        expect(await serving()).toBe(200);
    }, 1_200_000);
});

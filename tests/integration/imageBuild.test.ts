/**
 * image.build on the simulated hosts through the real Pulumi engine: a small image derived from the test image (no
 * network: FROM the image spark-1 already holds) is built by spark-1's own Docker engine over the node's ssh://
 * connection (the Docker provider's Image), copied to spark-2 along the chain, and served. A second up does nothing; a
 * one-line change to the context rebuilds it and replaces only what uses the image; a failing build fails the up with
 * the build's words and replaces nothing. Run by tests/integration/run.sh.
 */
import * as fs from "fs";
import * as path from "path";
import { CONTAINER } from "../../infra/contract";
import { Project, changed, destroy, editConfig, expectOk, openProject, preview, removeProject, stepSeconds, up } from "./engine";
import { Hosts, stackConfig } from "./hosts";
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

beforeAll(async () => {
    p = await openProject(STACK, "vcl-it-build-");
    // inside the project (the config refuses a context outside it): the project copy's own directory
    context = path.join(p.dir, "build-context");
    fs.mkdirSync(context);
    writeContext("one");
    hosts = new Hosts(stackConfig(p.stackFile));
    model = hosts.cfg.model.servedName;
    for (const n of [head, worker]) {
        await hosts.removeProjectContainers(n);
        await hosts.docker(n, ["image", "rm", "--force", REF]);
    }
    editConfig(p, (cfg) => {
        cfg.image = { ...(cfg.image as object), ref: REF, build: { context: "build-context", args: { FLAVOUR: "derived" } } };
    });
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
        const ok = await chat(r.outputs.endpoint as string, model, r.outputs.apiKey as string);
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

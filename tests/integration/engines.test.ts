/**
 * The paths that only a current Docker Engine takes, run for real on one testbed with mixed engines (tests/testbed:
 * `up 3 --engine h1=20.10,h2=28-containerd,h3=28-containerd`): spark-1 runs Debian's Docker 20.10 on the classic store
 * and holds the image (the chain's source), spark-2 and spark-3 run Docker 28.5.2 (built from the Go module proxy by
 * setup/engine.sh) on the containerd image store, where an image's ID is a manifest digest.
 *
 * One `up` of the `local` stack on those three hosts (tensor parallel 3, the six-head model; the head and serve on
 * spark-2) copies the 3.2 GB image into both containerd stores and serves a real completion; the next `up`s change
 * nothing and load nothing, the image compared by its facts across the two stores. Then, with small images made on
 * the hosts, the layer filter and `docker load` on Docker 28: its OCI-layout `docker save`, a containerd-store host
 * that receives only the layer it lacks, one whose store holds a layer as another blob (what it gets instead), and
 * Docker 28 on the classic store (spark-3 switched to it). The engines are put back as the stage had them at the end.
 */
import * as path from "path";
import { CONTAINER } from "../../infra/contract";
import { imageChainProvider } from "../../infra/providers/imageChain";
import {
    Project,
    changed,
    destroy,
    editConfig,
    expectOk,
    openProject,
    removeProject,
    stateResources,
    up,
    withoutMonitoring,
} from "./engine";
import { expectNothingLeft } from "./handoff";
import { Hosts, runArgv, sshdAccepted, stackConfig } from "./hosts";
import { chat, completionTokens, mergeTimings } from "./support";

const TESTBED = process.env.VCL_TESTBED_DIR ?? "/var/lib/vllm-cluster-testbed";
const TB = path.join(__dirname, "..", "testbed", "testbed");
const LAYERS_PY = path.join(__dirname, "..", "..", "infra", "scripts", "image_layers.py");
const ENGINES = "h1=20.10,h2=28-containerd,h3=28-containerd";
const TIMINGS_FILE = process.env.VCL_INTEGRATION_TIMINGS;
const timings: Record<string, number> = {};
const [classic, head, other] = ["spark-1", "spark-2", "spark-3"];
const ALL = [classic, head, other];
/** Small images made on spark-2 (the containerd store gzips what it imports and commits): a base, and one layer on it. */
const BASE = "vcl-engines-base:1";
const UPD = "vcl-engines-update:1";

let p: Project;
let hosts: Hosts;
const seconds = (t0: number) => Math.round((Date.now() - t0) / 100) / 10;

async function testbed(args: string[]): Promise<string> {
    const r = await runArgv([TB, ...args], { timeoutMs: 1_800_000 });
    if (r.code !== 0)
        throw new Error(`testbed ${args.join(" ")} failed (exit ${r.code}): ${r.stderr.trim().split("\n").slice(-8).join("\n")}`);
    return r.stdout;
}

const sh = (node: string, script: string) => hosts.must(node, ["sh", "-c", script], 600_000);

/** Bytes the host has received on its fabric link (its own /proc/net/dev: the ssh session runs in its namespace). */
async function fabricRx(node: string): Promise<number> {
    const line = (await hosts.must(node, ["cat", "/proc/net/dev"])).split("\n").find((l) => l.trim().startsWith("fabric0:"));
    if (!line) throw new Error(`no fabric0 in ${node}'s /proc/net/dev`);
    return Number(line.split(":")[1].trim().split(/\s+/)[0]);
}

/** The image's layer DiffIDs on the node (`null` on the containerd store when its content is incomplete). */
async function layersOn(node: string, ref: string): Promise<string[] | null> {
    return JSON.parse(await hosts.must(node, ["docker", "image", "inspect", "--format", "{{json .RootFS.Layers}}", ref])) as
        string[] | null;
}

/** The files of a container made from the image: it exists only where the engine could unpack every layer. */
async function filesOf(node: string, ref: string): Promise<string[]> {
    const out = await sh(node, `c=$(docker create ${ref} /x) && docker export "$c" | tar -t; rc=$?; docker rm "$c" >/dev/null; exit $rc`);
    return out
        .split("\n")
        .filter((f) => f !== "" && !f.endsWith("/") && !/^(\.dockerenv|etc\/|dev\/|proc\/|sys\/)/.test(f))
        .sort();
}

const member = (node: string) => ({ node, target: hosts.target(node), peerHost: hosts.node(node).fabricIp });
const from = (node: string) => ({ kind: "host" as const, node, target: hosts.target(node) });

/** One chain copy of `ref` (the real ImageChain provider), with what it sent and what each member received. */
async function copy(ref: string, src: string, to: string[], layers: "missing" | "all") {
    const before = Object.fromEntries(await Promise.all(to.map(async (n) => [n, await fabricRx(n)])));
    const t0 = Date.now();
    const r = await imageChainProvider.create!({ ref, source: from(src), members: to.map(member), layers });
    const outs = r.outs as { copied: string[]; sent: string; images: Record<string, string>; sourceImage: string };
    const received = Object.fromEntries(await Promise.all(to.map(async (n) => [n, (await fabricRx(n)) - before[n]])));
    return { ...outs, received, seconds: seconds(t0) };
}

const MiB = 1 << 20;

beforeAll(async () => {
    const t0 = Date.now();
    await testbed(["up", "3", "--engine", ENGINES]);
    timings["engines: testbed up (20.10, 28 containerd x2)"] = seconds(t0);
    p = await openProject("local", "vcl-engines-");
    withoutMonitoring(p);
    editConfig(p, (c) => {
        const model = c.model as Record<string, unknown>;
        model.hostPath = `${model.hostPath}-h6`;
        const [one, two] = c.nodes as (Record<string, unknown> & { env: Record<string, string> })[];
        const { role: _role, ...spark1 } = one;
        c.nodes = [
            { ...two, role: "head", env: { ...two.env, OMP_PLACES: "{0}" } },
            { ...two, name: other, sshHost: "10.231.0.13", fabricIp: "10.232.0.13", env: { ...two.env, OMP_PLACES: "{1}" } },
            { ...spark1, env: { ...one.env, OMP_PLACES: "{0}" } },
        ];
        (c.serve as Record<string, unknown>).tensorParallelSize = 3;
    });
    hosts = new Hosts(stackConfig(p.stackFile));
    expect(hosts.cfg.head.name).toBe(head);
    for (const n of ALL) await hosts.removeProjectContainers(n);
    // the containerd stores start without the image, so the up copies it there
    for (const n of [head, other]) await hosts.docker(n, ["image", "rm", "--force", hosts.cfg.image.ref], 300_000);
}, 2_400_000);

afterAll(async () => {
    if (TIMINGS_FILE) mergeTimings(TIMINGS_FILE, timings);
    if (p) {
        await destroy(p);
        removeProject(p);
    }
    if (hosts) for (const n of ALL) await hosts.docker(n, ["image", "rm", "--force", UPD, BASE]);
    // each host back to the engine the stage runs (VCL_TESTBED_ENGINE, else 20.10); each engine keeps its images
    await testbed(["up", "3"]);
}, 1_200_000);

describe("a cluster on Docker 28's containerd store and Debian's 20.10, through the real Pulumi engine", () => {
    test("testbed status names each host's engine and store", async () => {
        const status = await testbed(["status"]);
        expect(status).toMatch(/^spark-1 .*dockerd=yes engine=20\.10 docker=20\.10\.\S+ store=classic\(overlay2\) /m);
        for (const n of [head, other]) {
            expect(status).toMatch(
                new RegExp(`^${n} .*dockerd=yes engine=28-containerd docker=28\\.5\\.2 store=containerd\\(overlayfs\\) `, "m"),
            );
        }
    }, 60_000);

    test("one up copies the image into both containerd stores and serves a real completion from a head on one of them", async () => {
        const r = expectOk(await up(p));
        timings["engines: up to serving (image into two containerd stores, TP 3)"] = Math.round(r.seconds * 10) / 10;
        const answer = await chat(String(r.outputs.endpoint), hosts.cfg.model.servedName, String(r.outputs.apiKey));
        expect(answer.status).toBe(200);
        expect(completionTokens(answer)).toBeGreaterThan(0);
        expect(String(r.outputs.endpoint)).toContain(hosts.node(head).sshHost);

        // one image, two IDs: the config digest on the classic store, a manifest digest on the containerd store
        const ids = Object.fromEntries(await Promise.all(ALL.map(async (n) => [n, await hosts.imageId(n, hosts.cfg.image.ref)])));
        expect(ids[head]).toMatch(/^sha256:[0-9a-f]{64}$/);
        expect(ids[head]).not.toBe(ids[classic]);
        expect(ids[other]).toBe(ids[head]);
        expect(await layersOn(head, hosts.cfg.image.ref)).toEqual(await layersOn(classic, hosts.cfg.image.ref));
        // each host's containers are made from its own ID
        expect(await hosts.inspect(head, CONTAINER.rayHead, "{{.Image}}")).toBe(ids[head]);
        expect(await hosts.inspect(head, CONTAINER.serve, "{{.Image}}")).toBe(ids[head]);
        expect(await hosts.inspect(classic, CONTAINER.rayWorker, "{{.Image}}")).toBe(ids[classic]);
        expect(await hosts.inspect(other, CONTAINER.rayWorker, "{{.Image}}")).toBe(ids[other]);

        const chain = (await stateResources(p)).find((x) => x.name === "image-chain")!.outputs as {
            copied: string[];
            sent: string;
            images: Record<string, string>;
            sourceImage: string;
        };
        expect(chain.copied).toEqual([head, other]);
        expect(chain.sent).toBe("2 of 2 layers");
        const [, srcStore, content] = chain.sourceImage.split(" ");
        expect(srcStore).toBe("classic");
        for (const n of [head, other]) expect(chain.images[n]).toBe(`${ids[n]} containerd ${content}`);
    }, 2_400_000);

    test("the next up changes nothing and opens no connection; up --refresh reads every host again and loads nothing", async () => {
        const ssh0 = sshdAccepted(TESTBED, ALL);
        const quiet = expectOk(await up(p, { expectNoChanges: true }));
        timings["engines: no-op up"] = Math.round(quiet.seconds * 10) / 10;
        expect(changed(quiet)).toEqual([]);
        expect(sshdAccepted(TESTBED, ALL)).toEqual(ssh0);

        const since = Math.floor(Date.now() / 1000);
        const r = expectOk(await up(p, { refresh: true, expectNoChanges: true }));
        timings["engines: up --refresh, nothing to do"] = Math.round(r.seconds * 10) / 10;
        expect(changed(r)).toEqual([]);
        for (const n of [head, other]) {
            const events = await hosts.must(n, [
                "docker",
                "events",
                "--since",
                String(since),
                "--until",
                String(Math.floor(Date.now() / 1000) + 1),
                "--filter",
                "type=image",
                "--format",
                "{{.Action}}",
            ]);
            expect(events.split("\n").filter((a) => a === "load" || a === "import")).toEqual([]);
        }
    }, 1_200_000);

    test("destroy leaves nothing of the stack on any host", async () => {
        expectOk(await destroy(p));
        await expectNothingLeft(p, hosts, ALL, head);
    }, 600_000);
});

describe("layers on Docker 28 (small images made on spark-2)", () => {
    let diffIds: string[] = [];

    beforeAll(async () => {
        for (const n of ALL) await hosts.docker(n, ["image", "rm", "--force", UPD, BASE]);
        // a base of 16 MiB of random bytes and an update of 8 MiB (docker import, then docker cp and commit: no shell)
        await sh(
            head,
            `d=$(mktemp -d) && head -c 16M /dev/urandom >"$d/base" && tar -C "$d" -c base | docker import - ${BASE} >/dev/null && ` +
                `head -c 8M /dev/urandom >"$d/update" && c=$(docker create ${BASE} /update) && docker cp "$d/update" "$c:/update" && ` +
                `docker commit "$c" ${UPD} >/dev/null; rc=$?; docker rm "$c" >/dev/null 2>&1; rm -rf "$d"; exit $rc`,
        );
        diffIds = (await layersOn(head, UPD)) ?? [];
        expect(diffIds).toHaveLength(2);
    }, 600_000);

    test("docker save on the containerd store writes the OCI layout, its layers gzipped; the filter holds the base back by its content", async () => {
        const listing = await sh(head, `docker save ${UPD} | tar -tv`);
        expect(listing).toMatch(/ index\.json$/m);
        expect(listing).toMatch(/ oci-layout$/m);
        expect(listing).not.toMatch(/layer\.tar/);
        const blobs = (l: string) =>
            [...l.matchAll(/ (\d+) \S+ \S+ blobs\/sha256\/([0-9a-f]{64})$/gm)].map((m) => ({
                size: Number(m[1]),
                digest: `sha256:${m[2]}`,
            }));
        const all = blobs(listing);
        // the layers are named by their compressed digests, none by its DiffID: the filter cannot decide them by name
        expect(all.filter((b) => diffIds.includes(b.digest))).toEqual([]);
        expect(all.filter((b) => b.size > 8 * MiB).length).toBe(2);

        const r = await hosts.on(
            head,
            ["bash", "-c", `set -o pipefail; docker save ${UPD} | python3 ${LAYERS_PY} ${diffIds[0]} | tar -tv`],
            300_000,
        );
        expect(r.code).toBe(0);
        expect(r.stderr).toMatch(/image_layers: sent 1 layer\(s\), \d+ bytes; held back 1 the receiving hosts have, 1[67]\d{6} bytes/);
        const filtered = r.stdout;
        const kept = blobs(filtered);
        const gone = all.filter((b) => !kept.some((k) => k.digest === b.digest));
        expect(gone).toHaveLength(1);
        expect(gone[0].size).toBeGreaterThan(16 * MiB);
    }, 300_000);

    test("hosts on either store that hold the base receive only the new layer: a containerd store (the base's blob as the source has it) and 20.10", async () => {
        const base = await copy(BASE, head, [other, classic], "all");
        expect(base.copied).toEqual([other, classic]);
        const upd = await copy(UPD, head, [other, classic], "missing");
        timings["engines: an 8 MiB layer to a containerd store and a classic one"] = upd.seconds;
        expect(upd.copied).toEqual([other, classic]);
        expect(upd.sent).toBe("1 of 2 layers");
        for (const n of [other, classic]) {
            // the 8 MiB layer and the chain's own bytes, never the 16 MiB base again
            expect(upd.received[n]).toBeGreaterThan(8 * MiB);
            expect(upd.received[n]).toBeLessThan(12 * MiB);
            expect(await layersOn(n, UPD)).toEqual(diffIds);
            expect(await filesOf(n, UPD)).toEqual(["base", "update"]);
        }
        // the containerd store's copy is complete: it saves the whole image again (a source for another copy)
        const saved = await sh(other, `docker save ${UPD} | tar -t | grep -c '^blobs/sha256/.'`);
        expect(Number(saved.trim())).toBe(4); // manifest, config, two layers
        console.log(`only the missing layer: ${JSON.stringify(upd)}`);
    }, 600_000);

    test("a containerd store that holds the base as another blob (uncompressed, from 20.10) is left incomplete by a partial load, and gets the whole image", async () => {
        for (const img of [UPD, BASE]) await hosts.docker(other, ["image", "rm", "--force", img]);
        // spark-1's copy of the base came from the containerd store and is saved by 20.10 uncompressed
        const base = await copy(BASE, classic, [other], "all");
        expect(base.copied).toEqual([other]);
        expect(await layersOn(other, BASE)).toEqual([diffIds[0]]);
        const upd = await copy(UPD, head, [other], "missing");
        timings["engines: partial load left incomplete, then the whole image"] = upd.seconds;
        console.log(`held back a layer the host holds as another blob: ${JSON.stringify(upd)}`);
        expect(upd.sent).toBe(
            "1 of 2 layers, then the whole image to node spark-3 (a layer held back was not in its containerd store as the blob the image names)",
        );
        // the new layer, then the whole image: what the wasted partial load cost
        expect(upd.received[other]).toBeGreaterThan(32 * MiB);
        expect(await layersOn(other, UPD)).toEqual(diffIds);
        expect(await filesOf(other, UPD)).toEqual(["base", "update"]);
    }, 600_000);

    test("Docker 28 on the classic store: its save names layers by DiffID; it receives only the new layer, and as a source sends only that", async () => {
        await testbed(["up", "3", "--engine", "h1=20.10,h2=28-containerd,h3=28"]);
        expect(await testbed(["status"])).toMatch(/^spark-3 .*engine=28 docker=28\.5\.2 store=classic\(overlay2\) /m);
        await copy(BASE, head, [other], "all");
        const upd = await copy(UPD, head, [other], "missing");
        expect(upd.sent).toBe("1 of 2 layers");
        expect(upd.received[other]).toBeLessThan(12 * MiB);
        // the classic store's ID is the config digest: another ID than the containerd store's, the same image
        const [idOther, idHead] = [await hosts.imageId(other, UPD), await hosts.imageId(head, UPD)];
        expect(idOther).not.toBe(idHead);
        expect(await layersOn(other, UPD)).toEqual(diffIds);
        const listing = await sh(other, `docker save ${UPD} | tar -t`);
        for (const d of diffIds) expect(listing).toContain(`blobs/sha256/${d.slice(7)}`);
        // from the classic 28 store to 20.10: decided by name, the base held back
        await hosts.docker(classic, ["image", "rm", "--force", UPD]);
        const back = await copy(UPD, other, [classic], "missing");
        expect(back.sent).toBe("1 of 2 layers");
        expect(back.received[classic]).toBeLessThan(12 * MiB);
        expect(await filesOf(classic, UPD)).toEqual(["base", "update"]);
    }, 900_000);
});

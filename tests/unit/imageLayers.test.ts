/**
 * Layer-aware image distribution: which layers need not travel (from the receiving hosts' own layer lists), and the
 * filter the source runs on `docker save`'s archive (infra/scripts/image_layers.py, run here as the file it is). The
 * simulated hosts' real `docker load` of a filtered archive is in the distribution bench and its smoke.
 */
import { execFileSync, spawnSync } from "child_process";
import { createHash } from "crypto";
import * as fs from "fs";
import * as os from "os";
import * as path from "path";
import { chainIds, layersToHoldBack, savesOciLayout } from "../../infra/builders/image";
import { imageEnds } from "../../infra/builders/imageChain";
import { SCRIPTS_DIR } from "../../infra/builders/remoteStep";

const sha = (b: Buffer | string) => `sha256:${createHash("sha256").update(b).digest("hex")}`;
const [a, b, c] = ["a", "b", "c"].map((x) => sha(`layer ${x}`));

describe("chain IDs and the layers held back", () => {
    test("a chain ID is the first DiffID, then the sha256 of the one below, a space and the next DiffID", () => {
        // the value `printf '%s %s' A B | sha256sum` gives, as the OCI image spec defines it
        const ab = `sha256:${execFileSync("sh", ["-c", `printf '%s %s' '${a}' '${b}' | sha256sum | cut -c1-64`])
            .toString()
            .trim()}`;
        expect(chainIds([a, b])).toEqual([a, ab]);
        expect(chainIds([a, b, c])[1]).toBe(ab);
        expect(chainIds([b, a])[1]).not.toBe(ab);
        expect(chainIds([])).toEqual([]);
    });

    test("what every receiving host holds at the same place is held back, and nothing else", () => {
        // a base every host has: only the new top layer travels
        expect(layersToHoldBack([a, b, c], [[[a, b]], [[a, b], [a]]])).toEqual([a, b]);
        // one host has only the bottom layer: the stream carries what that host lacks
        expect(layersToHoldBack([a, b, c], [[[a, b]], [[a]]])).toEqual([a]);
        // the same layer on another layer below it is not the same place: docker load would look it up and miss it
        expect(layersToHoldBack([a, b, c], [[[b]]])).toEqual([]);
        // a layer that occurs twice travels when either place is missing
        expect(layersToHoldBack([a, b, a], [[[a, b]]])).toEqual([b]);
        // a host with no image at all: the whole image
        expect(layersToHoldBack([a, b], [[]])).toEqual([]);
    });

    test("Docker saves layers as blobs named by digest from 25 on, as <id>/layer.tar files before", () => {
        expect(["28.5.2", "25.0.0", "v27.1.1", "29.0.0-rc.1"].map(savesOciLayout)).toEqual([true, true, true, true]);
        expect(["20.10.24+dfsg1", "24.0.9", "", "unknown"].map(savesOciLayout)).toEqual([false, false, false, false]);
    });

    test("the chain ships the filter only when it holds something back", () => {
        expect(imageEnds().script).not.toContain("image_layers_py=");
        expect(imageEnds().arg).toBe("");
        const ends = imageEnds([a, b]);
        expect(ends.arg).toBe(`${a},${b}`);
        expect(ends.script).toContain("image_layers_py=");
    });
});

describe("image_layers.py on a docker save archive", () => {
    let dir: string;
    beforeEach(() => (dir = fs.mkdtempSync(path.join(os.tmpdir(), "vcl-layers-"))));
    afterEach(() => fs.rmSync(dir, { recursive: true, force: true }));

    const filter = (input: Buffer, skip: string) =>
        spawnSync("python3", [path.join(SCRIPTS_DIR, "image_layers.py"), skip, dir], { input, maxBuffer: 64 << 20 });

    /** An archive laid out as `docker save` writes it: classic (<v1 id>/layer.tar) and OCI (blobs/sha256/<digest>) entries. */
    function archive(): { tar: Buffer; base: Buffer; top: Buffer; blob: Buffer } {
        const src = path.join(dir, "src");
        const base = Buffer.alloc(3 << 20, 1); // larger than a pipe and than one read of the filter
        const top = Buffer.alloc(5000, 2);
        const blob = Buffer.alloc(7000, 3);
        const put = (rel: string, data: Buffer | string) => {
            fs.mkdirSync(path.dirname(path.join(src, rel)), { recursive: true });
            fs.writeFileSync(path.join(src, rel), data);
        };
        put("1111/layer.tar", base);
        put("1111/json", '{"id":"1111"}');
        put("2222/layer.tar", top);
        put("2222/json", '{"id":"2222","parent":"1111"}');
        fs.mkdirSync(path.join(src, "3333"));
        fs.symlinkSync("../1111/layer.tar", path.join(src, "3333", "layer.tar")); // a layer shared by two places
        put(`blobs/sha256/${sha(blob).slice(7)}`, blob);
        put("manifest.json", '[{"Layers":["1111/layer.tar","2222/layer.tar","3333/layer.tar"]}]');
        return { tar: execFileSync("tar", ["-C", src, "-cf", "-", "."], { maxBuffer: 64 << 20 }), base, top, blob };
    }

    function entries(tar: Buffer): Record<string, Buffer | string> {
        const out = path.join(dir, "out");
        fs.mkdirSync(out);
        execFileSync("tar", ["-C", out, "-xf", "-"], { input: tar });
        const found: Record<string, Buffer | string> = {};
        const walk = (rel: string) => {
            for (const e of fs.readdirSync(path.join(out, rel), { withFileTypes: true })) {
                const r = path.posix.join(rel, e.name);
                if (e.isDirectory()) walk(r);
                else if (e.isSymbolicLink()) found[r] = `-> ${fs.readlinkSync(path.join(out, r))}`;
                else found[r] = fs.readFileSync(path.join(out, r));
            }
        };
        walk("");
        return found;
    }

    test("layers in SKIP are held back, recognised by content (classic) or by name (OCI); everything else passes unchanged", () => {
        const { tar, base, top, blob } = archive();
        const r = filter(tar, `${sha(base)},${sha(blob)}`);
        expect(r.status).toBe(0);
        const got = entries(r.stdout);
        expect(Object.keys(got).sort()).toEqual(["1111/json", "2222/json", "2222/layer.tar", "3333/layer.tar", "manifest.json"]);
        expect(got["2222/layer.tar"]).toEqual(top);
        expect(got["3333/layer.tar"]).toBe("-> ../1111/layer.tar");
        expect(got["manifest.json"].toString()).toContain("1111/layer.tar");
        expect(r.stderr.toString()).toMatch(/sent 1 layer\(s\), 5000 bytes; held back 2 .*, 3152728 bytes/);
        expect(r.stdout.length).toBeLessThan(tar.length - base.length);
        // nothing left behind in the spool directory but what the test made
        expect(fs.readdirSync(dir).sort()).toEqual(["out", "src"]);
    });

    test("an empty SKIP passes the archive through whole", () => {
        const { tar, base, blob } = archive();
        const r = filter(tar, "");
        expect(r.status).toBe(0);
        const got = entries(r.stdout);
        // (Buffer.equals: jest's deep equality walks 3 MiB byte by byte)
        expect(Buffer.isBuffer(got["1111/layer.tar"]) && base.equals(got["1111/layer.tar"])).toBe(true);
        expect(got[`blobs/sha256/${sha(blob).slice(7)}`]).toEqual(blob);
    });

    /**
     * An archive as the containerd image store saves it (OCI layout, blobs sorted by name): a layer it got
     * uncompressed (named by its DiffID), layers it keeps gzipped (named by their compressed digest, two members in
     * one of them, as concatenated gzip streams are), a config, and a blob that looks like gzip and is not.
     */
    function ociArchive() {
        const src = path.join(dir, "oci");
        const plain = Buffer.alloc(2 << 20, 4);
        const kept = Buffer.concat([Buffer.alloc(3 << 20, 0), Buffer.alloc(1000, 5)]); // 3 MiB of zeros: gzip's best ratio
        const fresh = Buffer.alloc(6000, 6);
        const gz = (b: Buffer) => execFileSync("gzip", ["-c", "-n"], { input: b, maxBuffer: 64 << 20 });
        const keptGz = Buffer.concat([gz(kept.subarray(0, 1 << 20)), gz(kept.subarray(1 << 20))]);
        const freshGz = gz(fresh);
        const notGzip = Buffer.concat([Buffer.from([0x1f, 0x8b]), Buffer.alloc(500, 7)]);
        const config = Buffer.from('{"rootfs":{"type":"layers"}}');
        const blobs = [plain, keptGz, freshGz, notGzip, config];
        for (const b of blobs) {
            fs.mkdirSync(path.join(src, "blobs", "sha256"), { recursive: true });
            fs.writeFileSync(path.join(src, "blobs", "sha256", sha(b).slice(7)), b);
        }
        fs.writeFileSync(path.join(src, "index.json"), "{}");
        const tar = execFileSync("tar", ["-C", src, "--sort=name", "-cf", "-", "blobs", "index.json"], { maxBuffer: 64 << 20 });
        return { tar, plain, kept, keptGz, fresh, freshGz, notGzip, config };
    }

    test("OCI layout: an uncompressed layer is held back by its name, a gzipped one by its decompressed content", () => {
        const a = ociArchive();
        const r = filter(a.tar, [sha(a.plain), sha(a.kept), sha(a.notGzip.subarray(2))].join(","));
        expect(r.stderr.toString()).toMatch(/sent 2 layer\(s\), \d+ bytes; held back 2 the receiving hosts have/);
        expect(r.status).toBe(0);
        const got = entries(r.stdout);
        const blob = (b: Buffer) => `blobs/sha256/${sha(b).slice(7)}`;
        expect(Object.keys(got).sort()).toEqual([blob(a.config), blob(a.freshGz), blob(a.notGzip), "index.json"].sort());
        expect(got[blob(a.freshGz)]).toEqual(a.freshGz);
        // a blob that does not decompress is never held back: it travels as it is
        expect(got[blob(a.notGzip)]).toEqual(a.notGzip);
        expect(fs.readdirSync(dir).sort()).toEqual(["oci", "out"]);
    });

    test("OCI layout: a gzipped layer not in SKIP travels unchanged; with SKIP empty every blob passes", () => {
        const a = ociArchive();
        const some = filter(a.tar, sha(a.plain));
        expect(some.status).toBe(0);
        const got = entries(some.stdout);
        expect(got[`blobs/sha256/${sha(a.keptGz).slice(7)}`]).toEqual(a.keptGz);
        expect(got[`blobs/sha256/${sha(a.plain).slice(7)}`]).toBeUndefined();
        fs.rmSync(path.join(dir, "out"), { recursive: true });
        const none = filter(a.tar, "");
        expect(none.status).toBe(0);
        expect(Object.keys(entries(none.stdout))).toHaveLength(6);
    });

    test("a save stream cut short fails, and a SKIP that is not a digest is named", () => {
        const { tar, base } = archive();
        const cut = filter(tar.subarray(0, 1 << 20), sha(base));
        expect(cut.status).not.toBe(0);
        const bad = filter(tar, "sha256:xyz");
        expect(bad.status).toBe(2);
        expect(bad.stderr.toString()).toContain("not a layer digest: 'sha256:xyz'");
    });
});

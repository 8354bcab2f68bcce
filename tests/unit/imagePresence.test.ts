import { imagePresenceProvider } from "../../infra/providers/imagePresence";

const base = {
    node: "spark-2",
    ref: "img:1",
    ensureScript: "echo copying >&2; echo sha256:aaa",
    inspectScript: "echo sha256:aaa",
    expectedId: "sha256:aaa",
    hostArch: "aarch64",
};
const p = imagePresenceProvider;

describe("image presence provider", () => {
    test("diff: nothing to do when inputs and the observed ID match", async () => {
        const d = await p.diff!("id", { ...base, imageId: "sha256:aaa" }, base);
        expect(d.changes).toBe(false);
    });

    test("diff: source ID moved on, or refresh found the image gone, or ref changed", async () => {
        expect((await p.diff!("id", { ...base, imageId: "sha256:aaa" }, { ...base, expectedId: "sha256:bbb" })).changes).toBe(true);
        expect((await p.diff!("id", { ...base, imageId: "" }, base)).changes).toBe(true);
        expect((await p.diff!("id", { ...base, imageId: "sha256:aaa" }, { ...base, ref: "img:2" })).changes).toBe(true);
        // never a replacement: the same host is updated in place
        expect((await p.diff!("id", { ...base, imageId: "" }, base)).replaces).toEqual([]);
    });

    test("create runs the ensure script with EXPECTED_ID/HOST_ARCH and records the ID", async () => {
        const r = await p.create!({
            ...base,
            ensureScript: `[ "$EXPECTED_ID" = sha256:aaa ] && [ "$HOST_ARCH" = aarch64 ] && echo sha256:aaa`,
        });
        expect(r.id).toBe("spark-2/img:1");
        expect(r.outs.imageId).toBe("sha256:aaa");
    });

    test("create fails with the script's message and the host", async () => {
        await expect(
            p.create!({ ...base, ensureScript: `echo "image img:1 on node spark-2: loaded ID x differs" >&2; exit 1` }),
        ).rejects.toThrow(/image img:1 on node spark-2 failed \(exit 1\):\nimage img:1 on node spark-2: loaded ID x differs/);
        await expect(p.create!({ ...base, ensureScript: "echo not-an-id" })).rejects.toThrow(/expected an image ID, got "not-an-id"/);
    });

    test("read re-inspects the host: a removed image reads as an empty ID", async () => {
        const gone = await p.read!("spark-2/img:1", { ...base, imageId: "sha256:aaa", inspectScript: "true" });
        expect(gone.props?.imageId).toBe("");
        const there = await p.read!("spark-2/img:1", { ...base, imageId: "" });
        expect(there.props?.imageId).toBe("sha256:aaa");
    });

    test("update re-ensures with the new inputs", async () => {
        const r = await p.update!("spark-2/img:1", { ...base, imageId: "" }, { ...base, ensureScript: "echo sha256:ccc" });
        expect(r.outs?.imageId).toBe("sha256:ccc");
    });
});

import { imagePresenceProvider } from "../../infra/providers/imagePresence";

/** Facts lines (ID, store, content) of one image on the classic store, on the containerd store, and of another image. */
const CLASSIC = "sha256:aaa classic sha256:c1";
const CONTAINERD = "sha256:mmm containerd sha256:c1";
const OTHER = "sha256:bbb classic sha256:c2";

const base = {
    node: "spark-2",
    ref: "img:1",
    ensureScript: `echo copying >&2; echo ${CLASSIC}`,
    inspectScript: `echo ${CLASSIC}`,
    expectedImage: CLASSIC,
    hostArch: "aarch64",
};
const p = imagePresenceProvider;

describe("image presence provider", () => {
    test("diff: nothing to do when inputs and the observed image match", async () => {
        const d = await p.diff!("id", { ...base, imageId: "sha256:aaa", image: CLASSIC }, base);
        expect(d.changes).toBe(false);
    });

    test("diff: the same image under another ID on the containerd store is no change; another image is", async () => {
        expect((await p.diff!("id", { ...base, imageId: "sha256:mmm", image: CONTAINERD }, base)).changes).toBe(false);
        expect((await p.diff!("id", { ...base, imageId: "sha256:bbb", image: OTHER }, base)).changes).toBe(true);
    });

    test("diff: source image moved on, or refresh found the image gone, or ref changed", async () => {
        const held = { ...base, imageId: "sha256:aaa", image: CLASSIC };
        expect((await p.diff!("id", held, { ...base, expectedImage: OTHER })).changes).toBe(true);
        expect((await p.diff!("id", { ...base, imageId: "", image: "" }, base)).changes).toBe(true);
        expect((await p.diff!("id", held, { ...base, ref: "img:2" })).changes).toBe(true);
        // a state from before facts lines (an ID only) is looked at again
        expect((await p.diff!("id", { ...base, imageId: "sha256:aaa" }, base)).changes).toBe(true);
        // never a replacement: the same host is updated in place
        expect((await p.diff!("id", { ...base, imageId: "", image: "" }, base)).replaces).toEqual([]);
    });

    test("create runs the ensure script with EXPECTED_IMAGE/HOST_ARCH and records the ID and the facts line", async () => {
        const r = await p.create!({
            ...base,
            ensureScript: `[ "$EXPECTED_IMAGE" = '${CLASSIC}' ] && [ "$HOST_ARCH" = aarch64 ] && echo '${CONTAINERD}'`,
        });
        expect(r.id).toBe("spark-2/img:1");
        expect(r.outs.imageId).toBe("sha256:mmm");
        expect(r.outs.image).toBe(CONTAINERD);
    });

    test("create fails with the script's message and the host", async () => {
        await expect(
            p.create!({ ...base, ensureScript: `echo "image img:1 on node spark-2: holds x, not the source's image y" >&2; exit 1` }),
        ).rejects.toThrow(/image img:1 on node spark-2 failed \(exit 1\):\nimage img:1 on node spark-2: holds x, not the source's image y/);
        await expect(p.create!({ ...base, ensureScript: "echo sha256:only-an-id" })).rejects.toThrow(
            /expected the image's ID, store and content, got "sha256:only-an-id"/,
        );
    });

    test("read re-inspects the host: a removed image reads as an empty ID", async () => {
        const gone = await p.read!("spark-2/img:1", { ...base, imageId: "sha256:aaa", image: CLASSIC, inspectScript: "true" });
        expect([gone.props?.imageId, gone.props?.image]).toEqual(["", ""]);
        const there = await p.read!("spark-2/img:1", { ...base, imageId: "", image: "" });
        expect([there.props?.imageId, there.props?.image]).toEqual(["sha256:aaa", CLASSIC]);
    });

    test("update re-ensures with the new inputs", async () => {
        const r = await p.update!("spark-2/img:1", { ...base, imageId: "" }, { ...base, ensureScript: `echo ${OTHER}` });
        expect(r.outs?.imageId).toBe("sha256:bbb");
    });
});

import { imagePinned, isPinned } from "../../policies/imagePinned";
import { UNKNOWN, cluster, runStackPolicy, withLabel } from "./util";

const withRef = (ref: string) => cluster().map((r) => ({ ...r, props: withLabel(r.props as never, "vllm-cluster.image-ref", ref) }));

describe("image-pinned (advisory)", () => {
    it("accepts digest references and image IDs", async () => {
        expect(await runStackPolicy(imagePinned, cluster())).toEqual([]);
        expect(isPinned("registry.example:5000/team/vllm:1.2@sha256:" + "c".repeat(64))).toBe(true);
        expect(isPinned("sha256:" + "d".repeat(64))).toBe(true);
    });

    it("warns once per mutable tag, naming the containers and the fix", async () => {
        const v = await runStackPolicy(imagePinned, withRef("hellohal2064/vllm-qwen3.5-gb10:latest"));
        expect(v).toHaveLength(1);
        expect(v[0].message).toContain("image ref 'hellohal2064/vllm-qwen3.5-gb10:latest' is a mutable tag");
        expect(v[0].message).toContain("container 'spark-1-ray-head'");
        expect(v[0].message).toContain("container 'spark-1-serve'");
        expect(v[0].message).toContain("<repo>@sha256:<digest>");
        expect(v[0].urn).toContain("::spark-1-ray-head");
    });

    it("says when a reference without a tag means :latest", async () => {
        const v = await runStackPolicy(imagePinned, withRef("localhost:5000/vllm"));
        expect(v[0].message).toContain("'localhost:5000/vllm' (implicitly :latest)");
    });

    it("reports nothing for values not known yet (preview)", async () => {
        expect(await runStackPolicy(imagePinned, withRef(UNKNOWN))).toEqual([]);
    });
});

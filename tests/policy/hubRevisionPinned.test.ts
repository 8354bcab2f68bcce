import { hubRevisionPinned } from "../../policies/hubRevisionPinned";
import { UNKNOWN, cluster, runStackPolicy } from "./util";

const COMMIT = "71e503be02026ab53ccd4ba93deb2d4f38c94744";

/** The model.hub download resource as the engine records it (infra/providers/hubModel.ts). */
function hubModel(revision: string, commit: string = COMMIT) {
    return {
        name: "model-hub",
        type: "pulumi-nodejs:dynamic:Resource",
        props: {
            node: "spark-1",
            repo: "Qwen/Qwen3.5-122B-A10B-FP8",
            revision,
            commit,
            hostPath: "/models/q",
            script: "...",
            endpoint: "",
        },
    };
}

describe("hub-revision-pinned (advisory)", () => {
    it("accepts a full commit hash, and stacks without model.hub", async () => {
        expect(await runStackPolicy(hubRevisionPinned, [...cluster(), hubModel(COMMIT)])).toEqual([]);
        expect(await runStackPolicy(hubRevisionPinned, cluster())).toEqual([]);
    });

    it("flags a branch or tag name, naming the commit it resolves to today and the fix", async () => {
        const v = await runStackPolicy(hubRevisionPinned, [...cluster(), hubModel("main")]);
        expect(v).toHaveLength(1);
        expect(v[0].message).toBe(
            `model.hub.revision 'main' of Qwen/Qwen3.5-122B-A10B-FP8 is a branch or tag name (today it names ${COMMIT}). ` +
                "Pin the commit: set model.hub.revision to its 40-character hash.",
        );
        expect(v[0].urn).toContain("::model-hub");
        const short = await runStackPolicy(hubRevisionPinned, [hubModel("71e503b", UNKNOWN)]);
        expect(short[0].message).toContain("'71e503b' of Qwen/Qwen3.5-122B-A10B-FP8 is a branch or tag name. Pin");
    });
});

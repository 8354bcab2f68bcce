import { gpuMemoryShared } from "../../policies/gpuMemoryShared";
import { cluster, replace, runStackPolicy, serve, withFlag, withLabel } from "./util";

/** A serve container reserving `fraction` of the GPU memory of spark-1, a GB10 (unified) or a host with its own. */
function serving(fraction: string, unified: boolean) {
    return withLabel(withFlag(serve(), "--gpu-memory-utilization", fraction), "vllm-cluster.unified-memory", String(unified));
}

/** A second cluster's serve container on spark-1. */
function second(fraction: string, unified = false) {
    return { name: "second-spark-1-serve", props: withLabel(serving(fraction, unified), "vllm-cluster.cluster", "second") };
}

/** The compliant cluster with its serve container reserving `fraction`. */
function first(fraction: string, unified = false) {
    return replace(cluster(), "spark-1-serve", serving(fraction, unified));
}

describe("gpu-memory-shared", () => {
    it("accepts one cluster alone, whatever its fraction (gpu-memory-utilization judges that)", async () => {
        expect(await runStackPolicy(gpuMemoryShared, first("0.95"))).toEqual([]);
    });

    it("accepts two clusters on a host whose fractions fit together", async () => {
        expect(await runStackPolicy(gpuMemoryShared, [...first("0.5"), second("0.45")])).toEqual([]);
    });

    it("reports two clusters on a host that reserve more than it has, naming both and the sum, against the later one", async () => {
        const v = await runStackPolicy(gpuMemoryShared, [...first("0.6"), second("0.4")]);
        expect(v).toHaveLength(1);
        expect(v[0].message).toContain("node spark-1: the clusters on it reserve 0.6 (cluster vllm) + 0.4 (cluster second) = 1");
        expect(v[0].message).toContain("above 0.95");
        expect(v[0].urn).toContain("::second-spark-1-serve");
    });

    it("keeps headroom on unified-memory hosts, and takes its bounds from config", async () => {
        const v = await runStackPolicy(gpuMemoryShared, [...first("0.5", true), second("0.42", true)]);
        expect(v.map((x) => x.message)).toEqual([expect.stringContaining("= 0.92 of its GPU memory, above 0.9 (a unified-memory host)")]);
        expect(await runStackPolicy(gpuMemoryShared, [...first("0.6"), second("0.4")], { max: 1 })).toEqual([]);
    });
});

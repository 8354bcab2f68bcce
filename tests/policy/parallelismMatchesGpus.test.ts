import { parallelismMatchesGpus } from "../../policies/parallelismMatchesGpus";
import {
    UNKNOWN,
    cluster,
    nativeCluster,
    nativeRank,
    rayWorker,
    replace,
    runStackPolicy,
    serve,
    withFlag,
    withLabel,
    withProps,
} from "./util";

const run = (stack = cluster()) => runStackPolicy(parallelismMatchesGpus, stack);
const withServe = (props: ReturnType<typeof serve>) => replace(cluster(), "spark-1-serve", props);

describe("parallelism-matches-gpus", () => {
    it("accepts TP 2 x PP 1 over two one-GPU nodes", async () => {
        expect(await run()).toEqual([]);
    });

    it("reports TP x PP above the GPUs Ray offers, naming the nodes and the fix", async () => {
        const props = withLabel(
            withLabel(withFlag(serve(), "--tensor-parallel-size", "4"), "vllm-cluster.tensor-parallel-size", "4"),
            "vllm-cluster.cluster-gpus",
            "4",
        );
        const v = await run(withServe(props));
        expect(v).toHaveLength(1);
        expect(v[0].message).toContain("--tensor-parallel-size 4 x --pipeline-parallel-size 1 = 4");
        expect(v[0].message).toContain("Ray containers offer 2 GPU(s) (spark-1: 1, spark-2: 1)");
        expect(v[0].message).toContain("serve.tensorParallelSize");
        expect(v[0].urn).toContain("::spark-1-serve");
    });

    it("reads an abbreviation later on the line as vLLM does: it overrides the full flag", async () => {
        const props = withLabel(serve(), "vllm-cluster.cluster-gpus", "2");
        props.command!.push("--tensor-parallel", "1");
        const v = await run(withServe(props));
        expect(v.map((x) => x.message)).toEqual(
            expect.arrayContaining([expect.stringContaining("--tensor-parallel-size 1 x --pipeline-parallel-size 1 = 1")]),
        );
    });

    it("reports a worker added without raising the parallelism", async () => {
        const stack = [...cluster(), { name: "spark-3-ray-worker", props: rayWorker("spark-3") }];
        const v = await run(stack);
        expect(v.map((x) => x.message)).toEqual([expect.stringContaining("Ray containers offer 3 GPU(s)")]);
    });

    it("accepts TP 1 x PP 2 and the short -tp/-pp spellings", async () => {
        let props = withFlag(withFlag(serve(), "--tensor-parallel-size", undefined), "--pipeline-parallel-size", undefined);
        props.command!.push("-tp", "1", "-pp", "2");
        props = withLabel(withLabel(props, "vllm-cluster.tensor-parallel-size", "1"), "vllm-cluster.pipeline-parallel-size", "2");
        expect(await run(withServe(props))).toEqual([]);
    });

    it("treats absent flags as vLLM's default of 1", async () => {
        const props = withFlag(withFlag(serve(), "--tensor-parallel-size", undefined), "--pipeline-parallel-size", undefined);
        const v = await run(withServe(props));
        expect(v.map((x) => x.message)).toContainEqual(expect.stringContaining("= 1, but the Ray containers offer 2"));
    });

    it("reports a disagreement with the cluster-gpus label", async () => {
        const v = await run(withServe(withLabel(serve(), "vllm-cluster.cluster-gpus", "3")));
        expect(v.map((x) => x.message)).toEqual([expect.stringContaining("label vllm-cluster.cluster-gpus says the cluster has 3")]);
    });

    it("reports labels that disagree with the command", async () => {
        const v = await run(withServe(withLabel(serve(), "vllm-cluster.pipeline-parallel-size", "2")));
        expect(v.map((x) => x.message)).toEqual([
            expect.stringContaining(
                "label vllm-cluster.pipeline-parallel-size='2' disagrees with the command's --pipeline-parallel-size 1",
            ),
        ]);
    });

    it("reports values that are not positive integers", async () => {
        const v = await run(withServe(withFlag(serve(), "--tensor-parallel-size", "two")));
        expect(v[0].message).toContain("--tensor-parallel-size 'two' is not a positive integer");
        const g = await run(replace(cluster(), "spark-2-ray-worker", withLabel(rayWorker(), "vllm-cluster.gpus", "x")));
        expect(g[0].message).toContain("label vllm-cluster.gpus='x' is not a GPU count");
    });

    it("reports nothing for values not known yet (preview)", async () => {
        const big = withFlag(serve(), "--tensor-parallel-size", "8");
        expect(await run(withServe(withProps(big, { command: UNKNOWN, labels: serve().labels })))).toEqual([]);
        expect(await run(withServe(withFlag(serve(), "--tensor-parallel-size", UNKNOWN)))).toEqual([]);
        const unknownGpus = replace(
            [...cluster(), { name: "spark-3-ray-worker", props: rayWorker("spark-3") }],
            "spark-3-ray-worker",
            withLabel(rayWorker("spark-3"), "vllm-cluster.gpus", UNKNOWN),
        );
        expect(await run(unknownGpus)).toEqual([]);
        expect(await run(withServe(withLabel(serve(), "vllm-cluster.cluster-gpus", UNKNOWN)))).toEqual([]);
    });

    it("checks only the cluster-gpus label when there are no Ray containers", async () => {
        const serveOnly = [{ name: "spark-1-serve", props: serve() }];
        expect(await run(serveOnly)).toEqual([]);
    });

    describe("native backend (no Ray containers): the serve ranks' GPUs are the cluster's", () => {
        it("accepts TP 2 over two one-GPU ranks, and TP 3 over three", async () => {
            expect(await run(nativeCluster())).toEqual([]);
            expect(await run(nativeCluster(3))).toEqual([]);
        });

        it("reports a rank added without raising the parallelism, on every rank, naming the ranks' nodes", async () => {
            const stack = [
                ...nativeCluster(),
                { name: "spark-3-serve", props: withLabel(nativeRank(2), "vllm-cluster.tensor-parallel-size", "2") },
            ];
            const fixed = stack.map((r) => ({
                ...r,
                props: withFlag(
                    withLabel(r.props as ReturnType<typeof serve>, "vllm-cluster.cluster-gpus", "2"),
                    "--tensor-parallel-size",
                    "2",
                ),
            }));
            const v = await run(fixed);
            expect(v).toHaveLength(3);
            for (const x of v) {
                expect(x.message).toContain("= 2, but the native serve ranks offer 3 GPU(s) (spark-1: 1, spark-2: 1, spark-3: 1)");
            }
        });

        it("reports a rank whose GPU count is not known as a count", async () => {
            const v = await run(replace(nativeCluster(), "spark-2-serve", withLabel(nativeRank(1), "vllm-cluster.gpus", "x")));
            expect(v.map((x) => x.message)).toEqual([expect.stringContaining("label vllm-cluster.gpus='x' is not a GPU count")]);
        });

        it("reports nothing while a rank's GPUs are unknown (preview)", async () => {
            const stack = [...nativeCluster(), { name: "spark-3-serve", props: withLabel(nativeRank(2), "vllm-cluster.gpus", UNKNOWN) }];
            const v = await run(
                stack.map((r) => ({ ...r, props: withLabel(r.props as ReturnType<typeof serve>, "vllm-cluster.cluster-gpus", "2") })),
            );
            expect(v.filter((x) => x.message.includes("offer"))).toEqual([]);
        });
    });
});

import { gpuMemoryUtilization } from "../../policies/gpuMemoryUtilization";
import { UNKNOWN, rayHead, runResourcePolicy, serve, withFlag, withLabel, withProps } from "./util";

const run = (props: ReturnType<typeof serve>, config: object = {}) =>
    runResourcePolicy(gpuMemoryUtilization, { name: "spark-1-serve", props }, config);

describe("gpu-memory-utilization", () => {
    it("accepts 0.9 on a unified-memory host", async () => {
        expect(await run(serve())).toEqual([]);
    });

    it("rejects 0.97 on a unified-memory host, naming the container and the fix", async () => {
        const v = await run(withFlag(serve(), "--gpu-memory-utilization", "0.97"));
        expect(v).toHaveLength(1);
        expect(v[0].message).toContain("container 'spark-1-serve' (serve, node spark-1)");
        expect(v[0].message).toContain("above the maximum 0.9 (unified-memory host");
        expect(v[0].message).toContain("serve.gpuMemoryUtilization");
    });

    it("allows up to 0.95 on a host with dedicated GPU memory", async () => {
        const dedicated = withLabel(serve(), "vllm-cluster.unified-memory", "false");
        expect(await run(withFlag(dedicated, "--gpu-memory-utilization", "0.95"))).toEqual([]);
        const v = await run(withFlag(dedicated, "--gpu-memory-utilization", "0.96"));
        expect(v.map((x) => x.message)).toEqual([expect.stringContaining("above the maximum 0.95")]);
    });

    it("rejects a value below the minimum", async () => {
        const v = await run(withFlag(serve(), "--gpu-memory-utilization", "0.05"));
        expect(v.map((x) => x.message)).toEqual([expect.stringContaining("below the minimum 0.1")]);
    });

    it("reads --flag=value and underscore spellings", async () => {
        const cmd = withFlag(serve(), "--gpu-memory-utilization", undefined);
        cmd.command!.push("--gpu_memory_utilization=0.99");
        expect(await run(cmd)).toHaveLength(1);
        // an abbreviation after the managed flag wins in vLLM's parser, so it is read here too
        const abbreviated = serve();
        abbreviated.command!.push("--gpu-memory", "0.99");
        expect(await run(abbreviated)).toHaveLength(1);
    });

    it("rejects a value that is not a number", async () => {
        const v = await run(withFlag(serve(), "--gpu-memory-utilization", "ninety"));
        expect(v[0].message).toContain("is not a number");
    });

    it("checks vLLM's default 0.9 when the flag is absent", async () => {
        const absent = withFlag(serve(), "--gpu-memory-utilization", undefined);
        expect(await run(absent)).toEqual([]);
        const v = await run(absent, { maxUnifiedMemory: 0.85 });
        expect(v[0].message).toContain("vLLM's default 0.9 (flag not set)");
    });

    it("honours configured bounds", async () => {
        expect(await run(withFlag(serve(), "--gpu-memory-utilization", "0.6"), { min: 0.7 })).toHaveLength(1);
        expect(await run(withFlag(serve(), "--gpu-memory-utilization", "0.93"), { maxUnifiedMemory: 0.93 })).toEqual([]);
    });

    it("ignores Ray containers and unmanaged containers", async () => {
        expect(await runResourcePolicy(gpuMemoryUtilization, { name: "h", props: rayHead() })).toEqual([]);
        const unmanaged = withLabel(withFlag(serve(), "--gpu-memory-utilization", "0.99"), "vllm-cluster.managed", undefined);
        expect(await run(unmanaged)).toEqual([]);
    });

    it("reports nothing while values are unknown (preview)", async () => {
        const bad = withFlag(serve(), "--gpu-memory-utilization", "0.99");
        expect(await run(withProps(bad, { command: UNKNOWN }))).toEqual([]);
        expect(await run(withFlag(serve(), "--gpu-memory-utilization", UNKNOWN))).toEqual([]);
        expect(await run(withProps(bad, { labels: UNKNOWN }))).toEqual([]);
        const noFlag = withFlag(serve(), "--gpu-memory-utilization", undefined);
        noFlag.command!.push(UNKNOWN);
        expect(await run(noFlag, { maxUnifiedMemory: 0.5 })).toEqual([]);
    });

    it("uses the looser bound when the unified-memory label is unknown", async () => {
        const props = withLabel(withFlag(serve(), "--gpu-memory-utilization", "0.93"), "vllm-cluster.unified-memory", UNKNOWN);
        expect(await run(props)).toEqual([]);
    });
});

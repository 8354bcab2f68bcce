import { unifiedMemoryGuarded } from "../../policies/unifiedMemoryGuarded";
import { ContainerProps, UNKNOWN, rayHead, rayWorker, runResourcePolicy, serve, withLabel } from "./util";

/** A fixture as the program builds it on a unified-memory host: a ceiling, and container_init.sh with a floor. */
function guarded(p: ContainerProps, o: { floorKib?: number; memory?: unknown } = {}): ContainerProps & { memory?: unknown } {
    const floorKib = o.floorKib ?? 4194304;
    const memory = "memory" in o ? o.memory : 113920;
    const init = ["/bin/sh", "-c", "boot", "container_init", "c2NyaXB0", "name=x", "node=spark-1", `min-available-kib=${floorKib}`, "--"];
    return { ...p, entrypoints: [...init, ...(p.entrypoints ?? [])], memory };
}

const run = (props: ContainerProps & { memory?: unknown }) => runResourcePolicy(unifiedMemoryGuarded, { name: "c", props });

describe("unified-memory-guarded", () => {
    it("accepts every role with a ceiling and a floor", async () => {
        for (const p of [rayHead(), rayWorker(), serve()]) {
            expect(await run(guarded(p))).toEqual([]);
        }
    });

    it("flags a container without a ceiling, naming it and the setting", async () => {
        const v = await run(guarded(serve(), { memory: undefined }));
        expect(v.map((x) => x.message)).toEqual([expect.stringContaining("container 'c' (serve, node spark-1): no memory ceiling")]);
        expect(v[0].message).toContain("memoryGuard.limit");
        expect(await run(guarded(serve(), { memory: 0 }))).toHaveLength(1);
    });

    it("flags a container without a floor (0, or no init at all)", async () => {
        const zero = await run(guarded(rayWorker(), { floorKib: 0 }));
        expect(zero.map((x) => x.message)).toEqual([expect.stringContaining("no memory floor")]);
        expect(zero[0].message).toContain("memoryGuard.minAvailable");
        const bare = await run({ ...rayHead(), memory: 1000 } as ContainerProps);
        expect(bare.map((x) => x.message)).toEqual([expect.stringContaining("no memory floor")]);
    });

    it("leaves hosts with dedicated GPU memory alone", async () => {
        expect(await run(withLabel(serve(), "vllm-cluster.unified-memory", "false"))).toEqual([]);
    });

    it("does not decide on what is not known yet (the ceiling from the host's memory at preview)", async () => {
        expect(await run(guarded(serve(), { memory: UNKNOWN }))).toEqual([]);
        expect(
            await run(
                guarded(withLabel(serve(), "vllm-cluster.unified-memory", UNKNOWN as unknown as string), {
                    floorKib: 0,
                    memory: undefined,
                }),
            ),
        ).toEqual([]);
    });
});

import { serveRequiresApiKey } from "../../policies/serveRequiresApiKey";
import { API_KEY_FILE, UNKNOWN, nativeRank, rayHead, runResourcePolicy, serve, withFlag, withLabel, withProps } from "./util";

type Props = ReturnType<typeof serve>;
const run = (props: Props) => runResourcePolicy(serveRequiresApiKey, { name: "spark-1-serve", props });
const messages = async (props: Props) => (await run(props)).map((v) => v.message);
const volumesWithoutKey = () => serve().volumes!.filter((v) => v.containerPath !== API_KEY_FILE);

describe("serve-requires-api-key", () => {
    it("accepts the key file mounted read-only and loaded by the entrypoint", async () => {
        expect(await run(serve())).toEqual([]);
    });

    it("accepts a read-only mount or a read-only parent directory", async () => {
        const mount = withProps(serve(), {
            volumes: volumesWithoutKey(),
            mounts: [{ type: "bind", source: "/var/lib/vllm-cluster/spark-1/api-key", target: API_KEY_FILE, readOnly: true }],
        });
        expect(await run(mount)).toEqual([]);
        const dir = withProps(serve(), {
            volumes: [...volumesWithoutKey(), { hostPath: "/s", containerPath: "/run/vllm-cluster/", readOnly: true }],
        });
        expect(await run(dir)).toEqual([]);
    });

    it("reports a missing api-key-file label", async () => {
        expect(await messages(withLabel(serve(), "vllm-cluster.api-key-file", undefined))).toEqual([
            expect.stringContaining("container 'spark-1-serve' (serve, node spark-1): no label vllm-cluster.api-key-file"),
        ]);
    });

    it("reports a key file that is not mounted, or mounted read-write", async () => {
        expect(await messages(withProps(serve(), { volumes: volumesWithoutKey() }))).toEqual([
            expect.stringContaining(`the API key file ${API_KEY_FILE} is not mounted`),
        ]);
        const rw = withProps(serve(), {
            volumes: [...volumesWithoutKey(), { hostPath: "/s", containerPath: API_KEY_FILE }],
        });
        expect(await messages(rw)).toEqual([expect.stringContaining("is mounted read-write. Mark that mount readOnly: true")]);
        const rwMount = withProps(serve(), {
            volumes: volumesWithoutKey(),
            mounts: [{ type: "bind", source: "/s", target: API_KEY_FILE, readOnly: false }],
        });
        expect(await messages(rwMount)).toEqual([expect.stringContaining("is mounted read-write")]);
    });

    it("reports --api-key on the command line in every spelling", async () => {
        // abbreviations too: vLLM's parser (argparse) takes any unambiguous prefix of a long option
        for (const words of [
            ["--api-key", "sk-123"],
            ["--api-key=sk-123"],
            ["--api_key", "sk-123"],
            ["--api-ke", "sk-1"],
            ["--api_k=sk-1"],
        ]) {
            const props = withFlag(serve(), "--port", "8001");
            props.command!.push(...words);
            expect(await messages(props)).toEqual([expect.stringContaining("passes --api-key")]);
        }
        const script = withProps(serve(), {
            entrypoints: ["/bin/sh", "-c", 'exec "$@" --api-key sk-123', "vllm-serve"],
        });
        expect(await messages(script)).toEqual([expect.stringContaining("passes --api-key")]);
        const abbreviated = withProps(serve(), { entrypoints: ["/bin/sh", "-c", 'exec "$@" --api sk-123', "vllm-serve"] });
        expect(await messages(abbreviated)).toEqual([expect.stringContaining("passes --api-key")]);
    });

    it("reports a literal VLLM_API_KEY in the entrypoint script", async () => {
        const props = withProps(serve(), {
            entrypoints: ["/bin/sh", "-c", 'VLLM_API_KEY=sk-123 exec "$@"', "vllm-serve"],
        });
        expect(await messages(props)).toEqual([expect.stringContaining("assigns VLLM_API_KEY a literal value")]);
    });

    it("reports VLLM_API_KEY in envs", async () => {
        const props = withProps(serve(), { envs: [...serve().envs!, "VLLM_API_KEY=sk-123"] });
        expect(await messages(props)).toEqual([expect.stringContaining("envs sets VLLM_API_KEY")]);
    });

    it("ignores Ray containers", async () => {
        expect(await runResourcePolicy(serveRequiresApiKey, { name: "h", props: rayHead() })).toEqual([]);
    });

    it("reports nothing for values not known yet (preview)", async () => {
        expect(await run(withLabel(serve(), "vllm-cluster.api-key-file", UNKNOWN))).toEqual([]);
        expect(await run(withProps(serve(), { volumes: UNKNOWN }))).toEqual([]);
        const unknownPath = withProps(serve(), {
            volumes: [...volumesWithoutKey(), { hostPath: "/s", containerPath: UNKNOWN, readOnly: true }],
        });
        expect(await run(unknownPath)).toEqual([]);
        const unknownReadOnly = withProps(serve(), {
            volumes: [...volumesWithoutKey(), { hostPath: "/s", containerPath: API_KEY_FILE, readOnly: UNKNOWN }],
        });
        expect(await run(unknownReadOnly)).toEqual([]);
        expect(await run(withProps(serve(), { envs: [UNKNOWN], command: UNKNOWN, entrypoints: UNKNOWN }))).toEqual([]);
    });

    describe("native backend", () => {
        it("accepts rank 0 with the key file and a headless rank without one", async () => {
            expect(await run(nativeRank(0))).toEqual([]);
            expect(await run(nativeRank(1))).toEqual([]);
        });

        it("still requires the key file on rank 0 (not headless)", async () => {
            expect(await messages(withLabel(nativeRank(0), "vllm-cluster.api-key-file", undefined))).toEqual([
                expect.stringContaining("no label vllm-cluster.api-key-file"),
            ]);
        });

        it("still reports a key leaked on a headless rank's command line or env", async () => {
            expect(await messages(withFlag(nativeRank(1), "--api-key", "sk-x"))).toEqual([expect.stringContaining("passes --api-key")]);
            const env = withProps(nativeRank(1), { envs: ["VLLM_API_KEY=sk-x"] });
            expect(await messages(env)).toEqual([expect.stringContaining("envs sets VLLM_API_KEY")]);
        });

        it("reports nothing about the key file while the command is unknown (preview)", async () => {
            expect(await run(withProps(nativeRank(1), { command: UNKNOWN }))).toEqual([]);
        });
    });
});

import { gpuContainersHostIpc } from "../../policies/gpuContainersHostIpc";
import { UNKNOWN, rayHead, rayWorker, runResourcePolicy, serve, withLabel, withProps } from "./util";

type Props = ReturnType<typeof serve>;
const run = (props: Props, config: object = {}) => runResourcePolicy(gpuContainersHostIpc, { name: "spark-2-ray-worker", props }, config);

describe("gpu-containers-host-ipc", () => {
    it("accepts host IPC, or a large enough /dev/shm", async () => {
        for (const props of [rayHead(), rayWorker(), serve()]) expect(await run(props)).toEqual([]);
        expect(await run(withProps(rayWorker(), { shmSize: 1024 }))).toEqual([]);
    });

    it("reports a container not on the host network, naming it and the fix", async () => {
        const v = await run(withProps(rayWorker(), { networkMode: "bridge" }));
        expect(v).toHaveLength(1);
        expect(v[0].message).toContain("container 'spark-2-ray-worker' (ray-worker, node spark-2): networkMode is bridge");
        expect(v[0].message).toContain('Set networkMode: "host"');
        const unset = await run(withProps(serve(), { networkMode: undefined }));
        expect(unset[0].message).toContain("unset (Docker's bridge network)");
    });

    it("reports Docker's 64 MB default and a small shmSize without host IPC", async () => {
        expect((await run(withProps(rayWorker(), { shmSize: undefined })))[0].message).toContain(
            "/dev/shm is Docker's default 64 MB, below 1024 MB",
        );
        expect((await run(withProps(rayWorker(), { shmSize: 512, ipcMode: "private" })))[0].message).toContain(
            "ipcMode is private and /dev/shm is 512 MB",
        );
    });

    it("honours minShmSizeMb", async () => {
        expect(await run(withProps(rayWorker(), { shmSize: 4096 }), { minShmSizeMb: 8192 })).toHaveLength(1);
        expect(await run(withProps(rayWorker(), { shmSize: 256 }), { minShmSizeMb: 256 })).toEqual([]);
    });

    it("ignores unmanaged containers", async () => {
        const foreign = withLabel(withProps(rayWorker(), { networkMode: "bridge", shmSize: 64 }), "vllm-cluster.managed", "false");
        expect(await run(foreign)).toEqual([]);
    });

    it("reports nothing for values not known yet (preview)", async () => {
        expect(await run(withProps(rayWorker(), { networkMode: UNKNOWN }))).toEqual([]);
        expect(await run(withProps(rayWorker(), { shmSize: UNKNOWN }))).toEqual([]);
        expect(await run(withProps(rayWorker(), { ipcMode: UNKNOWN, shmSize: 64 }))).toEqual([]);
    });
});

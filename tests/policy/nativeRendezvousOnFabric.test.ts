import { nativeRendezvousOnFabric } from "../../policies/nativeRendezvousOnFabric";
import { UNKNOWN, cluster, nativeCluster, nativeRank, replace, runStackPolicy, withFlag } from "./util";

const run = (stack = nativeCluster()) => runStackPolicy(nativeRendezvousOnFabric, stack);

describe("native-rendezvous-on-fabric", () => {
    it("is mandatory", () => {
        expect(nativeRendezvousOnFabric.enforcementLevel).toBe("mandatory");
    });

    it("accepts every rank dialling rank 0's fabric IP, for 2 and 4 ranks", async () => {
        expect(await run()).toEqual([]);
        expect(await run(nativeCluster(4))).toEqual([]);
    });

    it("reports a rank whose --master-addr is a management address, naming both containers", async () => {
        const bad = replace(nativeCluster(), "spark-2-serve", withFlag(nativeRank(1), "--master-addr", "10.1.230.180"));
        const v = await run(bad);
        expect(v.map((x) => x.message)).toEqual([
            "container 'spark-2-serve' (serve, node spark-2): --master-addr 10.1.230.180 is not rank 0's fabric IP " +
                "(VLLM_HOST_IP 192.168.200.12 on container 'spark-1-serve' (serve, node spark-1)): the rendezvous, " +
                "unauthenticated, would go over another network. Point it at the head's fabricIp (the program does).",
        ]);
        expect(v[0].urn).toContain("::spark-2-serve");
    });

    it("reports rank 0 itself listening for the rendezvous on another address than its fabric IP", async () => {
        const bad = replace(nativeCluster(), "spark-1-serve", withFlag(nativeRank(0), "--master-addr", "0.0.0.0"));
        expect((await run(bad)).map((x) => x.message)).toEqual([
            expect.stringMatching(/^container 'spark-1-serve' \(serve, node spark-1\): --master-addr 0\.0\.0\.0 is not rank 0's fabric IP/),
        ]);
    });

    it("leaves the Ray backend and values not known yet alone", async () => {
        expect(await run(cluster())).toEqual([]);
        const unknown = nativeRank(1);
        unknown.command![unknown.command!.indexOf("--master-addr") + 1] = UNKNOWN as unknown as string;
        expect(await run(replace(nativeCluster(), "spark-2-serve", unknown))).toEqual([]);
    });
});

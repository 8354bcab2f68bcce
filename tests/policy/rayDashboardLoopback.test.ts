import { rayDashboardLoopback } from "../../policies/rayDashboardLoopback";
import { UNKNOWN, rayHead, rayWorker, runResourcePolicy, serve, withLabel, withProps } from "./util";

type Props = ReturnType<typeof rayHead>;
const run = (props: Props) => runResourcePolicy(rayDashboardLoopback, { name: "spark-1-ray-head", props });
const withDashboardHost = (host: string) =>
    withProps(rayHead(), {
        command: rayHead().command!.map((w) => (w.startsWith("--dashboard-host") ? `--dashboard-host=${host}` : w)),
    });

describe("ray-dashboard-loopback", () => {
    it("accepts loopback spellings", async () => {
        for (const host of ["127.0.0.1", "localhost", "::1", "[::1]", "127.0.0.2"]) {
            expect(await run(withDashboardHost(host))).toEqual([]);
        }
    });

    it("rejects 0.0.0.0 and routable addresses, naming the container and the fix", async () => {
        for (const host of ["0.0.0.0", "192.168.200.12", "::", "10.1.230.180"]) {
            const v = await run(withDashboardHost(host));
            expect(v).toHaveLength(1);
            expect(v[0].message).toContain(`container 'spark-1-ray-head' (ray-head, node spark-1): ray start --dashboard-host ${host}`);
            expect(v[0].message).toContain("--dashboard-host=127.0.0.1");
        }
    });

    it("finds the flag as separate words and inside a sh -c script", async () => {
        const separate = withProps(rayHead(), {
            command: ["ray", "start", "--head", "--dashboard-host", "0.0.0.0", "--block"],
        });
        expect(await run(separate)).toHaveLength(1);
        const script = withProps(rayHead(), {
            entrypoints: ["/bin/sh", "-c"],
            command: ["ray start --head --dashboard-host '0.0.0.0' --block"],
        });
        expect(await run(script)).toHaveLength(1);
    });

    it("accepts an absent flag (Ray's default is localhost) but not a missing value", async () => {
        const absent = withProps(rayHead(), { command: ["ray", "start", "--head", "--block"] });
        expect(await run(absent)).toEqual([]);
        const noValue = withProps(rayHead(), { command: ["ray", "start", "--head", "--block", "--dashboard-host"] });
        expect((await run(noValue))[0].message).toContain("--dashboard-host has no value");
    });

    it("rejects a dashboard-host label that is not loopback", async () => {
        const v = await run(withLabel(rayHead(), "vllm-cluster.dashboard-host", "0.0.0.0"));
        expect(v.map((x) => x.message)).toEqual([expect.stringContaining("label vllm-cluster.dashboard-host='0.0.0.0'")]);
    });

    it("ignores workers and serve containers", async () => {
        const worker = withProps(rayWorker(), { command: ["start", "--dashboard-host=0.0.0.0"] });
        expect(await runResourcePolicy(rayDashboardLoopback, { name: "w", props: worker })).toEqual([]);
        expect(await runResourcePolicy(rayDashboardLoopback, { name: "s", props: serve() })).toEqual([]);
    });

    it("reports nothing for values not known yet (preview)", async () => {
        expect(await run(withProps(rayHead(), { command: ["start", "--head", UNKNOWN, "--block"] }))).toEqual([]);
        expect(await run(withProps(withDashboardHost("0.0.0.0"), { command: UNKNOWN }))).toEqual([]);
        expect(await run(withProps(rayHead(), { command: ["start", "--head", "--dashboard-host", UNKNOWN] }))).toEqual([]);
        expect(await run(withLabel(rayHead(), "vllm-cluster.dashboard-host", UNKNOWN))).toEqual([]);
    });
});

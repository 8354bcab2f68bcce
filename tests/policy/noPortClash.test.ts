import { noPortClash } from "../../policies/noPortClash";
import { UNKNOWN, cluster, nativeCluster, nativeRank, rayHead, rayWorker, replace, runStackPolicy, serve, withLabel } from "./util";

const withPorts = (props: ReturnType<typeof serve>, ports: unknown) =>
    withLabel(props, "vllm-cluster.ports", typeof ports === "string" ? ports : JSON.stringify(ports));

describe("no-port-clash", () => {
    it("accepts the compliant cluster", async () => {
        expect(await runStackPolicy(noPortClash, cluster())).toEqual([]);
    });

    it("reports serve on the Ray GCS port of the same node, against the container's URN", async () => {
        const stack = replace(cluster(), "spark-1-serve", withPorts(serve(), { serve: 6379 }));
        const v = await runStackPolicy(noPortClash, stack);
        expect(v).toHaveLength(1);
        expect(v[0].message).toContain("node spark-1: port 6379 is claimed more than once");
        expect(v[0].message).toContain("container 'spark-1-ray-head' (ray-head, node spark-1) port 'gcs'");
        expect(v[0].message).toContain("container 'spark-1-serve' (serve, node spark-1) port 'serve'");
        expect(v[0].urn).toContain("::spark-1-ray-head");
    });

    it("reports a container port equal to the node's SSH port", async () => {
        const stack = replace(cluster(), "spark-1-serve", withPorts(serve(), { serve: 22 }));
        const v = await runStackPolicy(noPortClash, stack);
        expect(v).toHaveLength(1);
        expect(v[0].message).toContain("the SSH port of node spark-1");
        expect(v[0].urn).toContain("::spark-1-serve");
    });

    it("reports two names of one container on the same port", async () => {
        const stack = replace(cluster(), "spark-1-ray-head", withPorts(rayHead(), { gcs: 6379, dashboard: 6379 }));
        expect((await runStackPolicy(noPortClash, stack))[0].message).toContain("port 6379 is claimed more than once");
    });

    it("allows the same port on different nodes", async () => {
        const stack = [...cluster(), { name: "spark-2-extra", props: withPorts(rayWorker("spark-2"), { serve: 8001 }) }];
        expect(await runStackPolicy(noPortClash, stack)).toEqual([]);
    });

    it("reports ports out of range and malformed labels", async () => {
        for (const [ports, text] of [
            [{ serve: 0 }, "'serve' = 0 is not a port in 1..65535"],
            [{ serve: 70000 }, "'serve' = 70000 is not a port"],
            [{ serve: 80.5 }, "'serve' = 80.5 is not a port"],
            [{ serve: "http" }, `'serve' = "http" is not a port`],
            ["{not json", "is not valid JSON"],
            ["[8001]", "must be a JSON object"],
        ] as const) {
            const v = await runStackPolicy(noPortClash, replace(cluster(), "spark-1-serve", withPorts(serve(), ports)));
            expect(v.map((x) => x.message)).toEqual([expect.stringContaining(text)]);
            expect(v[0].urn).toContain("::spark-1-serve");
        }
        const badSsh = replace(cluster(), "spark-2-ray-worker", withLabel(rayWorker(), "vllm-cluster.ssh-port", "99999"));
        expect((await runStackPolicy(noPortClash, badSsh))[0].message).toContain("ssh-port='99999' is not a port");
    });

    it("rejects privileged ports only when configured, never the SSH port", async () => {
        const stack = replace(cluster(), "spark-1-serve", withPorts(serve(), { serve: 443 }));
        expect(await runStackPolicy(noPortClash, stack)).toEqual([]);
        const v = await runStackPolicy(noPortClash, stack, { rejectPrivilegedPorts: true });
        expect(v.map((x) => x.message)).toEqual([expect.stringContaining("'serve' = 443 is privileged")]);
    });

    it("reports nothing for values not known yet (preview)", async () => {
        const unknownPorts = replace(cluster(), "spark-1-serve", withLabel(serve(), "vllm-cluster.ports", UNKNOWN));
        expect(await runStackPolicy(noPortClash, unknownPorts)).toEqual([]);
        const clashOnUnknownNode = replace(
            cluster(),
            "spark-1-serve",
            withLabel(withPorts(serve(), { serve: 6379 }), "vllm-cluster.node", UNKNOWN),
        );
        expect(await runStackPolicy(noPortClash, clashOnUnknownNode)).toEqual([]);
        const unknownLabels = replace(cluster(), "spark-1-serve", { ...serve(), labels: UNKNOWN });
        expect(await runStackPolicy(noPortClash, unknownLabels)).toEqual([]);
    });

    it("ignores containers the project does not manage and other resource types", async () => {
        const foreign = withLabel(withPorts(serve(), { serve: 6379 }), "vllm-cluster.managed", undefined);
        expect(await runStackPolicy(noPortClash, [...cluster(), { name: "other", props: foreign }])).toEqual([]);
        const notAContainer = { name: "cmd", type: "command:local:Command", props: serve() };
        expect(await runStackPolicy(noPortClash, [...cluster(), notAContainer])).toEqual([]);
    });

    it("native backend: accepts the compliant ranks; reports serve on the master port, naming native.masterPort", async () => {
        expect(await runStackPolicy(noPortClash, nativeCluster())).toEqual([]);
        const v = await runStackPolicy(
            noPortClash,
            replace(nativeCluster(), "spark-1-serve", withPorts(nativeRank(0), { serve: 29500, master: 29500 })),
        );
        expect(v).toHaveLength(1);
        expect(v[0].message).toContain("node spark-1: port 29500 is claimed more than once");
        expect(v[0].message).toContain("port 'serve' and container 'spark-1-serve' (serve, node spark-1) port 'master'");
        expect(v[0].message).toContain("native.masterPort");
        const ssh = await runStackPolicy(
            noPortClash,
            replace(nativeCluster(), "spark-1-serve", withPorts(nativeRank(0), { serve: 8001, master: 22 })),
        );
        expect(ssh.map((x) => x.message)).toEqual([expect.stringContaining("the SSH port of node spark-1")]);
    });
});

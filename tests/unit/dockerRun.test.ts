import * as pulumi from "@pulumi/pulumi";
import { nativeServeContainerArgs, rayWorkerContainerArgs, serveContainerArgs } from "../../components/containerArgs";
import { planCluster } from "../../infra/program";
import { dockerRunArgv } from "../integration/dockerRun";
import { loadStack } from "./harness";

/** Value following `flag` in argv, for each occurrence. */
function values(argv: string[], flag: string): string[] {
    return argv.flatMap((a, i) => (a === flag ? [argv[i + 1]] : []));
}

describe("dockerRunArgv (direct driver's translation of docker.ContainerArgs)", () => {
    const plan = planCluster(loadStack("local"), "local");

    const serve = serveContainerArgs({
        ...plan.serve,
        imageId: "sha256:abc",
        rayAddress: plan.headAddress,
        clusterFingerprint: "f00d",
    });

    test("serve container: every field the builder sets reaches docker run", () => {
        const argv = dockerRunArgv(serve);
        expect(argv.slice(0, 5)).toEqual(["docker", "run", "--detach", "--name", "vllm-serve"]);
        expect(argv).toContain("--network=host");
        expect(argv).toContain("--ipc=host");
        expect(argv).toContain("--shm-size=256m"); // 256m in the stack -> 256 MB
        expect(argv).toContain("--restart=on-failure:3");
        expect(argv).toContain("--stop-timeout=30");
        expect(argv.some((a) => a.startsWith("--gpus"))).toBe(false); // gpuRuntime none
        expect(values(argv, "--env")).toEqual(expect.arrayContaining(["VLLM_HOST_IP=10.232.0.11", "RAY_ADDRESS=10.232.0.11:6379"]));
        expect(values(argv, "--label")).toEqual(
            expect.arrayContaining([
                "vllm-cluster.role=serve",
                "vllm-cluster.cluster-fingerprint=f00d",
                'vllm-cluster.ports={"serve":8000}',
            ]),
        );
        expect(values(argv, "--volume")).toEqual([
            "/var/lib/vllm-cluster-testbed/models/tiny-standin:/models/tiny-standin:ro",
            "/var/lib/vllm-cluster/spark-1/api-key:/run/vllm-cluster/api-key:ro",
            "/var/lib/vllm-cluster/spark-1/ray:/tmp/ray",
        ]);
        // one-word --entrypoint, the rest of the entrypoint in front of the command: same first-process argv
        const img = argv.indexOf("sha256:abc");
        expect(argv[img - 1]).toBe("--entrypoint=/bin/sh");
        expect(argv.slice(img + 1, img + 6)).toEqual(["-c", expect.stringContaining("VLLM_API_KEY="), "vllm-serve", "vllm", "serve"]);
        expect(argv.slice(img + 1)).toEqual([...(serve.entrypoints as string[]).slice(1), ...(serve.command as string[])]);
        expect(argv).toContain("--max-model-len");
    });

    test("nvidia GPUs and other restart policies are passed through", () => {
        const argv = dockerRunArgv({ name: "x", image: "i", gpus: "all", restart: "no", entrypoints: ["/usr/bin/env"], command: ["true"] });
        expect(argv).toEqual([
            "docker",
            "run",
            "--detach",
            "--name",
            "x",
            "--gpus=all",
            "--restart=no",
            "--entrypoint=/usr/bin/env",
            "i",
            "true",
        ]);
    });

    test("refuses unresolved values and fields it does not map", () => {
        const worker = rayWorkerContainerArgs({
            ...plan.workers[0],
            imageId: "sha256:abc",
            headAddress: Promise.resolve(plan.headAddress),
            headContainerId: "c1",
        });
        expect(() => dockerRunArgv(worker)).toThrow(/command is not a resolved value/);
        expect(() => dockerRunArgv({ ...serve, image: pulumi.output("sha256:abc") })).toThrow(/image is not a resolved value/);
        expect(() => dockerRunArgv({ ...serve, privileged: true })).toThrow(/unsupported container args: privileged/);
    });

    describe("native backend ranks (local-native stack)", () => {
        const native = planCluster(loadStack("local-native"), "local-native");
        const [r0, r1] = native.native;
        const rank0 = dockerRunArgv(nativeServeContainerArgs({ ...r0, imageId: "sha256:abc" }));
        const rank1 = dockerRunArgv(nativeServeContainerArgs({ ...r1, imageId: "sha256:abc", rank0ContainerId: "c0ffee" }));

        test("plan: one rank per node, rank 0 on the head, master on the head's fabric IP", () => {
            expect(native.native.map((r) => [r.node.name, r.rank])).toEqual([
                ["spark-1", { nodeRank: 0, nnodes: 2, masterAddr: "10.232.0.11", masterPort: 29500 }],
                ["spark-2", { nodeRank: 1, nnodes: 2, masterAddr: "10.232.0.11", masterPort: 29500 }],
            ]);
            expect(planCluster(loadStack("local"), "local").native).toEqual([]);
        });

        test("every rank is vllm-serve on host network/IPC pinned to its own fabric IP, without Ray", () => {
            for (const [argv, ip] of [
                [rank0, "10.232.0.11"],
                [rank1, "10.232.0.12"],
            ] as const) {
                expect(argv.slice(0, 5)).toEqual(["docker", "run", "--detach", "--name", "vllm-serve"]);
                expect(argv).toContain("--network=host");
                expect(argv).toContain("--ipc=host");
                expect(argv).toContain("--restart=on-failure:3");
                const env = values(argv, "--env");
                expect(env).toEqual(
                    expect.arrayContaining([`VLLM_HOST_IP=${ip}`, "NCCL_SOCKET_IFNAME=fabric0", "GLOO_SOCKET_IFNAME=fabric0"]),
                );
                expect(env.some((e) => e.startsWith("RAY_ADDRESS="))).toBe(false);
                expect(values(argv, "--label")).toEqual(
                    expect.arrayContaining([
                        "vllm-cluster.role=serve",
                        "vllm-cluster.cluster-gpus=2",
                        "vllm-cluster.tensor-parallel-size=2",
                    ]),
                );
                expect(values(argv, "--volume").some((v) => v.includes("/ray"))).toBe(false);
            }
        });

        test("rank 0 serves with the key file and owns the API and master ports; rank 1 is headless, keyless, follows rank 0", () => {
            expect(values(rank0, "--label")).toEqual(
                expect.arrayContaining([
                    "vllm-cluster.node-rank=0",
                    'vllm-cluster.ports={"serve":8000,"master":29500}',
                    "vllm-cluster.api-key-file=/run/vllm-cluster/api-key",
                ]),
            );
            expect(values(rank0, "--volume")).toContain("/var/lib/vllm-cluster/spark-1/api-key:/run/vllm-cluster/api-key:ro");
            expect(rank0).toContain("--entrypoint=/bin/sh");
            expect(rank0).not.toContain("--headless");

            const l1 = values(rank1, "--label");
            expect(l1).toEqual(
                expect.arrayContaining(["vllm-cluster.node-rank=1", "vllm-cluster.ports={}", "vllm-cluster.rank0-container-id=c0ffee"]),
            );
            expect(l1.some((l) => l.startsWith("vllm-cluster.api-key-file"))).toBe(false);
            expect(values(rank1, "--volume").some((v) => v.includes("api-key"))).toBe(false);
            expect(rank1).toContain("--headless");
            expect(rank1).toContain("--entrypoint=/usr/bin/env");
        });
    });
});

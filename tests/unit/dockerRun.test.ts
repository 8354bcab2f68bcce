import * as pulumi from "@pulumi/pulumi";
import { rayWorkerContainerArgs, serveContainerArgs } from "../../components/containerArgs";
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
});

import { hostMountsSafe } from "../../policies/hostMountsSafe";
import { UNKNOWN, rayHead, rayWorker, runResourcePolicy, serve, withLabel, withProps } from "./util";

type Props = ReturnType<typeof serve>;
const run = (props: Props) => runResourcePolicy(hostMountsSafe, { name: "spark-1-serve", props });
const withVolume = (props: Props, hostPath: unknown) =>
    withProps(props, { volumes: [...(props.volumes ?? []), { hostPath, containerPath: "/x", readOnly: true }] });

describe("host-mounts-safe", () => {
    it("accepts the program's own mounts (model, node state, key file)", async () => {
        for (const props of [rayHead(), rayWorker(), serve()]) expect(await run(props)).toEqual([]);
    });

    it.each([
        ["/", "is the root directory"],
        ["/run", "is /run, a system directory"],
        ["/var/run/docker.sock", "is inside /var/run, a system directory"],
        ["/var", "is a parent of /var/run, a system directory"],
        ["/home/aurora", "is a home directory"],
        ["/root/.ssh", "is a home directory"],
        ["/var/lib/docker", "is inside /var/lib/docker, the container engine's own state"],
        ["/tmp/models", "is inside /tmp, which every local user can write to"],
    ])("reports a volume of %s, naming the container and why", async (hostPath, why) => {
        const v = await run(withVolume(serve(), hostPath));
        expect(v).toHaveLength(1);
        expect(v[0].message).toContain(`container 'spark-1-serve' (serve, node spark-1): mounts host path ${hostPath}, which ${why}`);
    });

    it("reports a bind mount of docker.sock", async () => {
        const props = withProps(rayWorker(), {
            mounts: [{ type: "bind", source: "/run/docker.sock", target: "/var/run/docker.sock", readOnly: false }],
        });
        expect((await run(props)).map((x) => x.message)).toEqual([expect.stringContaining("mounts host path /run/docker.sock")]);
    });

    it("reports nothing for a path not known yet (preview), or an unmanaged container", async () => {
        expect(await run(withVolume(serve(), UNKNOWN))).toEqual([]);
        expect(await run(withLabel(withVolume(serve(), "/"), "vllm-cluster.managed", "false"))).toEqual([]);
    });
});

import { rayTokenAuth } from "../../policies/rayTokenAuth";
import { UNKNOWN, rayHead, rayWorker, runResourcePolicy, serve, withProps } from "./util";

type Props = ReturnType<typeof rayHead>;
const run = (props: Props, name = "spark-1-ray-head") => runResourcePolicy(rayTokenAuth, { name, props });
const messages = async (props: Props, name?: string) => (await run(props, name)).map((v) => v.message);

describe("ray-token-auth", () => {
    it("accepts Ray containers with token authentication from a file", async () => {
        expect(await run(rayHead())).toEqual([]);
        expect(await run(rayWorker(), "spark-2-ray-worker")).toEqual([]);
    });

    it("reports a Ray container without it, naming the container and the setting", async () => {
        const open = withProps(rayWorker(), { envs: rayWorker().envs!.filter((e) => !e.startsWith("RAY_AUTH")) });
        expect(await messages(open, "spark-2-ray-worker")).toEqual([
            expect.stringMatching(
                /^container 'spark-2-ray-worker' \(ray-worker, node spark-2\): Ray runs without token authentication\. Set ray\.auth: token/,
            ),
        ]);
        const modeOnly = withProps(rayHead(), { envs: rayHead().envs!.filter((e) => !e.startsWith("RAY_AUTH_TOKEN_PATH")) });
        expect(await messages(modeOnly)).toHaveLength(1);
    });

    it("reports the token itself in the environment", async () => {
        const leaked = withProps(rayHead(), { envs: [...rayHead().envs!, "RAY_AUTH_TOKEN=hunter2"] });
        expect(await messages(leaked)).toEqual([expect.stringContaining("RAY_AUTH_TOKEN is set in envs, visible to docker inspect")]);
    });

    it("ignores serve containers and waits for unknown envs", async () => {
        expect(await run(serve(), "spark-1-serve")).toEqual([]);
        expect(await run(withProps(rayHead(), { envs: [UNKNOWN as unknown as string] }))).toEqual([]);
    });
});

/**
 * ray.shmSize and ray.maxRestarts: the Ray containers' own /dev/shm size and restart bound. Before these keys the Ray
 * containers took serve.shmSize and serve.maxRestarts; unset, they still do (the same values, so an existing stack's
 * Ray containers are not replaced), and the program warns.
 */
import { containerLimits } from "../../infra/builders/containers";
import { validateConfig } from "../../infra/config";
import { loadStack, loadStackRaw, runStack } from "./harness";

const shm = (cfg: ReturnType<typeof loadStack>) =>
    runStack("local", cfg).then((run) =>
        Object.fromEntries(
            ["ray-head-container", "ray-worker-spark-2-container", "serve-container"].map((n) => [n, run.byName.get(n)?.inputs.shmSize]),
        ),
    );

function local(edit: (raw: { serve: Record<string, unknown>; ray?: Record<string, unknown> }) => void) {
    const raw = loadStackRaw("local") as { serve: Record<string, unknown>; ray?: Record<string, unknown> };
    edit(raw);
    return validateConfig(raw);
}

test("unset ray keys: the Ray containers take serve's, as before; set: their own, and serve keeps serve's", () => {
    const serve = { shmSize: "1g", maxRestarts: 5 } as Parameters<typeof containerLimits>[0]["serve"];
    expect(containerLimits({ serve }, true)).toEqual({ shmSize: "1g", maxRestarts: 5 });
    expect(containerLimits({ serve }, false)).toEqual({ shmSize: "1g", maxRestarts: 5 });
    expect(containerLimits({ serve, ray: { shmSize: "2g", maxRestarts: 0 } }, false)).toEqual({ shmSize: "2g", maxRestarts: 0 });
    expect(containerLimits({ serve, ray: { shmSize: "2g", maxRestarts: 0 } }, true)).toEqual({ shmSize: "1g", maxRestarts: 5 });
});

test("through the graph: serve.shmSize alone sizes every container; with ray.shmSize the Ray containers take it", async () => {
    // a stack file from before the ray keys
    const before = local((r) => {
        r.serve.shmSize = "1g";
        delete r.ray?.shmSize;
        delete r.ray?.maxRestarts;
    });
    expect(before.ray.shmSize).toBeUndefined();
    expect(await shm(before)).toEqual({
        "ray-head-container": 1024,
        "ray-worker-spark-2-container": 1024,
        "serve-container": 1024,
    });
    expect(
        await shm(
            local((r) => {
                r.serve.shmSize = "1g";
                r.ray = { ...(r.ray ?? {}), shmSize: "2g" };
            }),
        ),
    ).toEqual({ "ray-head-container": 2048, "ray-worker-spark-2-container": 2048, "serve-container": 1024 });
});

test("the new keys are checked like serve's, naming the key", () => {
    expect(() => local((r) => (r.ray = { shmSize: "lots", maxRestarts: 101 }))).toThrow(/ray\.shmSize: .*\n.*ray\.maxRestarts: /);
});

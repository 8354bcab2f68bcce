/**
 * The HostCheck provider (the Ray gate and serve readiness): a changed input waits again as an update, so a failed
 * wait leaves the check in the state where refresh looks at it, and refresh records what its look found.
 */
import { hostCheckProvider } from "../../infra/providers/hostCheck";

const check = (over: Record<string, unknown> = {}) => ({
    what: "serve readiness on node spark-1",
    waitScript: "echo waited",
    checkScript: "echo looked",
    triggers: ["container-a"],
    result: "waited",
    healthy: true,
    problem: "",
    ...over,
});

test("a replaced container in triggers, or a new script, is an update that waits again, never a replacement", async () => {
    for (const changed of [{ triggers: ["container-b"] }, { waitScript: "echo other" }, { what: "serve readiness on node spark-2" }]) {
        const d = await hostCheckProvider.diff!("id", check(), check(changed));
        expect(d.changes).toBe(true);
        expect(d.replaces).toEqual([]);
    }
    expect(await hostCheckProvider.diff!("id", check(), check())).toEqual({ changes: false });
    // a refresh that found the condition broken makes the next up wait again
    expect((await hostCheckProvider.diff!("id", check({ healthy: false }), check())).changes).toBe(true);
});

test("an update runs the wait; a failed wait names the check and its stderr, and leaves the recorded state to the engine", async () => {
    const ok = await hostCheckProvider.update!("id", check(), check({ waitScript: "echo noise; echo fingerprint-2" }));
    expect(ok.outs).toMatchObject({ result: "fingerprint-2", healthy: true, problem: "" });
    await expect(
        hostCheckProvider.update!("id", check(), check({ waitScript: "echo 'crash budget exhausted: 4 starts' >&2; exit 1" })),
    ).rejects.toThrow(/serve readiness on node spark-1 failed \(exit 1\):\ncrash budget exhausted: 4 starts/);
});

test("refresh records the look: healthy with its result, or the problem it printed; an unreachable host fails the refresh", async () => {
    const good = await hostCheckProvider.read!("id", check({ checkScript: "echo fingerprint-3" }));
    expect(good.props).toMatchObject({ result: "fingerprint-3", healthy: true, problem: "" });
    const bad = await hostCheckProvider.read!(
        "id",
        check({ checkScript: "echo 'vllm-serve on node spark-1: crash budget exhausted: 4 starts without becoming healthy' >&2; exit 1" }),
    );
    expect(bad.props).toMatchObject({ result: "waited", healthy: false });
    expect((bad.props as { problem: string }).problem).toMatch(/crash budget exhausted: 4 starts/);
    await expect(
        hostCheckProvider.read!("id", check({ checkScript: "echo 'ssh: connect: No route to host' >&2; exit 255" })),
    ).rejects.toThrow(/serve readiness on node spark-1: cannot reach the host:\nssh: connect: No route to host/);
});

test("a wait records its own last line and how long it took; a refresh's look changes the result but not those", async () => {
    const waited = await hostCheckProvider.update!("id", check(), check({ waitScript: "sleep 0.3; echo '{\"readySeconds\":36.2}'" }));
    const outs = waited.outs as { waitResult: string; waitedSeconds: number; result: string };
    expect(outs.waitResult).toBe('{"readySeconds":36.2}');
    expect(outs.result).toBe(outs.waitResult);
    expect(outs.waitedSeconds).toBeGreaterThanOrEqual(0.3);
    expect(outs.waitedSeconds).toBeLessThan(30);
    const looked = await hostCheckProvider.read!("id", { ...check(), ...outs, checkScript: "echo '{\"ready\":true}'" });
    expect(looked.props).toMatchObject({
        result: '{"ready":true}',
        waitResult: '{"readySeconds":36.2}',
        waitedSeconds: outs.waitedSeconds,
    });
});

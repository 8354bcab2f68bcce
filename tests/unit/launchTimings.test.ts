/**
 * The launch timings (the stack's `launch` output) from the serve readiness wait's last line, which a host prints:
 * only numbers and docker's timestamp form pass; anything else is left out, and nothing fails.
 */
import { launchTimings, watchdogEvent } from "../../infra/builders/readiness";

test("the wait's line gives the time to ready, the first completion's time, the start; the wait's own duration is added", () => {
    const line =
        '{"ready":true,"node":"spark-1","port":8000,"completionSeconds":0.41,"readySeconds":36.2,"startedAt":"2026-12-07T07:28:31.871716179Z"}';
    expect(launchTimings(line, 38)).toEqual({
        readySeconds: 36.2,
        firstCompletionSeconds: 0.41,
        waitedSeconds: 38,
        startedAt: "2026-12-07T07:28:31.871716179Z",
    });
});

test("a state recorded before the field existed, or a line that is no JSON object: no figures, no failure", () => {
    expect(launchTimings(undefined, undefined)).toEqual({});
    expect(launchTimings('{"ready":true,"node":"spark-1","port":8000}', undefined)).toEqual({});
    for (const bad of ["", "not json", "[1,2]", "null", "36.2", '"text"']) expect(launchTimings(bad, 12)).toEqual({ waitedSeconds: 12 });
});

test("what a hostile host could put in the line is left out: strings, negatives, infinities, objects, a start that is no timestamp", () => {
    const line = JSON.stringify({
        readySeconds: "36.2",
        completionSeconds: -1,
        startedAt: "2026-12-07T07:28:31Z\u001b[2J",
        extra: { readySeconds: 1 },
    });
    expect(launchTimings(line, Number.POSITIVE_INFINITY)).toEqual({});
    expect(launchTimings('{"readySeconds":1e400,"completionSeconds":{"a":1},"startedAt":["2026-12-07T07:28:31Z"]}', -3)).toEqual({});
});

describe("watchdogEvent: the serve watchdog's last restart, from the readiness check's line", () => {
    const line = (watchdog: unknown) => JSON.stringify({ ready: true, node: "spark-1", port: 8000, completionSeconds: 0.4, watchdog });
    test("the host's text as it reported it, or none", () => {
        const what = "2026-12-07T12:00:05Z no completion within 30 s, 3 times: restarted (last: no answer within 30 s)";
        expect(watchdogEvent(line(what))).toBe(what);
        expect(watchdogEvent(JSON.stringify({ ready: true }))).toBe("none");
        expect(watchdogEvent(undefined)).toBe("none");
        expect(watchdogEvent("not json")).toBe("none");
    });
    test("what a lying host sends is printable text, bounded, and only a string", () => {
        expect(watchdogEvent(line("x\u001b[2J\u0007\u202e\u2028y"))).toBe("x[2Jy");
        expect(watchdogEvent(line("z".repeat(5000)))).toHaveLength(300);
        for (const v of [{ a: 1 }, ["a"], 7, null, "\u001b"]) expect(watchdogEvent(line(v))).toBe("none");
    });
});

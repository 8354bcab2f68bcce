/**
 * Which Docker engine each simulated host runs: `tests/testbed/testbed engines [N] [--engine SPEC]` prints what an
 * `up` with the same arguments starts on each host, without root and without touching a host; a bad spec is refused
 * naming what is wrong, before anything is touched. (`up` reads its arguments with the same code.)
 */
import { spawnSync } from "child_process";
import * as path from "path";

const ROOT = path.join(__dirname, "..", "..");

function engines(args: string[], env: Record<string, string> = {}) {
    const base = { ...process.env };
    delete base.VCL_TESTBED_ENGINE;
    const r = spawnSync("bash", ["tests/testbed/testbed", "engines", ...args], {
        cwd: ROOT,
        encoding: "utf8",
        env: { ...base, ...env },
        timeout: 30_000,
    });
    return { code: r.status, out: r.stdout.trim().split("\n").filter(Boolean), err: r.stderr.trim() };
}

describe("testbed engines", () => {
    test("without a spec every host runs Debian's 20.10", () => {
        expect(engines(["3"])).toEqual({ code: 0, out: ["spark-1 20.10", "spark-2 20.10", "spark-3 20.10"], err: "" });
        expect(engines([]).out).toEqual(["spark-1 20.10", "spark-2 20.10"]);
    });

    test("per host, as in `up 3 --engine h1=28-containerd,h2=28,h3=20.10`", () => {
        expect(engines(["3", "--engine", "h1=28-containerd,h2=28,h3=20.10"]).out).toEqual([
            "spark-1 28-containerd",
            "spark-2 28",
            "spark-3 20.10",
        ]);
        expect(engines(["--engine=spark-2=28", "2"]).out).toEqual(["spark-1 20.10", "spark-2 28"]);
    });

    test("one engine for every host; a host's own item beats it wherever it stands", () => {
        expect(engines(["3", "--engine", "h2=20.10,28-containerd"]).out).toEqual([
            "spark-1 28-containerd",
            "spark-2 20.10",
            "spark-3 28-containerd",
        ]);
    });

    test("VCL_TESTBED_ENGINE is read first, so a stage chooses; --engine's items win over it", () => {
        const env = { VCL_TESTBED_ENGINE: "28-containerd,h1=28" };
        expect(engines(["3"], env).out).toEqual(["spark-1 28", "spark-2 28-containerd", "spark-3 28-containerd"]);
        expect(engines(["3", "--engine", "h1=20.10,20.10"], env).out).toEqual(["spark-1 20.10", "spark-2 20.10", "spark-3 20.10"]);
    });

    test.each([
        [["2", "--engine", "h1=29"], "engine '29' (in 'h1=29') is not one of: 20.10 28 28-containerd"],
        [["2", "--engine", "docker28"], "engine 'docker28' (in 'docker28') is not one of: 20.10 28 28-containerd"],
        [["3", "--engine", "h4=28"], "'h4' (in 'h4=28') is not one of this up's hosts (1..3)"],
        [["2", "--engine", "h0=28"], "'h0' (in 'h0=28') is not one of this up's hosts (1..2)"],
        [["2", "--engine", "node1=28"], "'node1' (in 'node1=28') names no host: write h<i> or spark-<i>"],
        [["0"], "up: host count must be 1..32 (got '0')"],
    ])("refuses %j naming what is wrong", (args, message) => {
        const r = engines(args);
        expect(r.code).toBe(1);
        expect(r.out).toEqual([]);
        expect(r.err).toBe(`[testbed] ERROR: ${message}`);
    });

    test("a bad VCL_TESTBED_ENGINE is refused too", () => {
        expect(engines(["2"], { VCL_TESTBED_ENGINE: "h1=27" }).err).toBe(
            "[testbed] ERROR: engine '27' (in 'h1=27') is not one of: 20.10 28 28-containerd",
        );
    });
});

/**
 * bench/status.js against stand-in hosts (tests/unit/statusHosts.ts): the figures it prints come from refreshes that
 * reached every host, and a host that does not answer fails the bench naming it instead of counting as fast.
 */
import * as fs from "fs";
import * as path from "path";
import { NODES, outputsOf, standInClient, statusSpec, tempState, twoHosts } from "./statusHosts";

/** The bench runs in this process: its hosts are on loopback, so that nothing could leave this machine. */
const LOOPBACK = NODES.map((n) => ({ ...n, sshHost: n.sshHost.replace("10.231.0.", "127.0.0.") }));

let state: string;
let bench: {
    measure: (o: unknown, m: { refreshes: number; timeoutMs?: number }) => Promise<Record<string, unknown>>;
    quantile: (xs: number[], q: number) => number;
};
const PATH = process.env.PATH;
beforeEach(() => {
    state = tempState("vcl-status-bench-");
    // no simulated host's sshd log here: the bench says it did not count connections
    process.env.VCL_TESTBED_DIR = path.join(state, "no-testbed");
    process.env.XDG_CACHE_HOME = path.join(state, "cache");
    jest.isolateModules(() => {
        // eslint-disable-next-line @typescript-eslint/no-require-imports
        bench = require("../../bench/status.js");
    });
});
afterEach(() => {
    process.env.PATH = PATH;
    fs.rmSync(state, { recursive: true, force: true });
});

test("refreshes back to back: the first apart, median and p90 of the others, each host's answer", async () => {
    const [head, worker] = twoHosts(state);
    const client = standInClient(state, { "root@127.0.0.11": { bin: head.bin }, "root@127.0.0.12": { bin: worker.bin } });
    process.env.PATH = `${client.bin}:${PATH}`;
    const m = await bench.measure(outputsOf(state, { status: statusSpec(state, { nodes: LOOPBACK }) }), { refreshes: 4 });
    expect(m).toMatchObject({ refreshes: 4, hosts: 2, sshd: null });
    for (const k of ["firstSeconds", "medianSeconds", "p90Seconds", "maxSeconds"]) expect(m[k]).toBeGreaterThan(0);
    expect(Object.keys(m.hostMedianSeconds as object)).toEqual(["spark-1", "spark-2"]);
    expect(client.log().filter((l) => l === "ssh root@127.0.0.12")).toHaveLength(4);
    expect(bench.quantile([5, 1, 4, 2, 3, 6, 7, 8, 9, 10], 0.9)).toBe(9);
    expect(bench.quantile([3, 1, 2], 0.5)).toBe(2);
}, 60_000);

test("a host that does not answer fails the bench, named", async () => {
    const [head] = twoHosts(state);
    const refused = "ssh: connect to host 127.0.0.12 port 22: Connection refused";
    const client = standInClient(state, { "root@127.0.0.11": { bin: head.bin }, "root@127.0.0.12": { refuse: refused } });
    process.env.PATH = `${client.bin}:${PATH}`;
    await expect(bench.measure(outputsOf(state, { status: statusSpec(state, { nodes: LOOPBACK }) }), { refreshes: 2 })).rejects.toThrow(
        `refresh 1: spark-2: ${refused}`,
    );
}, 60_000);

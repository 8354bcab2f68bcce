/**
 * The status view's facts and text (setup/statusModel.js, setup/statusView.js) from recorded probe answers
 * (tests/unit/fixtures/status/probe-*.json: what status_probe.bash printed against stand-in hosts), and from a
 * hostile host whose every string carries terminal controls: nothing it sends may move the cursor or rewrite the
 * screen, in the text or in the JSON.
 */
import * as fs from "fs";
import * as path from "path";
import { FIXTURES, cid, sparkOutputs } from "./statusHosts";

// eslint-disable-next-line @typescript-eslint/no-require-imports
const { snapshotOf } = require("../../setup/statusModel.js");
// eslint-disable-next-line @typescript-eslint/no-require-imports
const { render } = require("../../setup/statusView.js");

const answer = (f: string) => ({ ok: true, seconds: 0.4, stdout: fs.readFileSync(path.join(FIXTURES, f), "utf8") });
const outputs = sparkOutputs;
const lines = (s: unknown) => (render(s, { header: "vllm-cluster status" }) as string).split("\n");
/** A character that could steer a terminal or hide text: C0 and C1 controls, DEL, format (bidi), line separators. */
const STEERING = /[\p{Cc}\p{Cf}\p{Co}\p{Cn}\p{Zl}\p{Zp}]/u;

describe("status view", () => {
    test("one refresh: each host's containers, budgets and verdicts, memory against the floor, Ray, serving since start", () => {
        const { snapshot } = snapshotOf(outputs(), [answer("probe-head-0.json"), answer("probe-worker.json")]);
        const text = lines(snapshot);
        expect(text).toEqual(
            expect.arrayContaining([
                "spark-1 (head, aurora@10.1.230.180): answered in 0.4 s",
                "  MemAvailable 19.2 GiB of 118.3 GiB; memory floor 4.0 GiB: 15.2 GiB above it",
                "  free disk at /home/aurora/models/Qwen3.5-122B-A10B-FP8: 756.6 GiB",
                "  CONTAINER      ROLE      STATE               RESTARTS  BUDGET USED  VERDICT",
                "  vllm-ray-head  ray-head  running 2 h 00 min  0         0 of 4       healthy",
                "  vllm-serve     serve     running 1 h 58 min  1         0 of 4       healthy",
                "  MemAvailable 2.9 GiB of 118.3 GiB; memory floor 4.0 GiB: BELOW THE FLOOR",
                "Ray: 2 members on their fabric IPs (spark-1 192.168.200.12, spark-2 192.168.200.13), 2 GPUs",
                "Serving qwen3.5-122b-a10b-fp8: 3 running, 1 waiting, KV cache 12.5 % used",
                "  since the server started 1 h 58 min ago: 108000 prompt and 7200 generated tokens,",
                "  on average prompt 15.2 tokens/s, generation 1.0 tokens/s; TTFT p50 0.38 s, p95 0.93 s over 120 requests",
            ]),
        );
        // the stopped worker: how long ago, how it ended (the init stays down with a clean exit), its budget used up and the verdict
        expect(text.find((l) => l.startsWith("  vllm-ray-worker"))).toMatch(
            /^ {2}vllm-ray-worker +ray-worker +exited 5 min ago \(exit 0\) +3 +4 of 4 +crash budget exhausted: 4 starts without becoming healthy/,
        );
        // the same facts as one object for scripts
        expect(snapshot.hosts[1]).toMatchObject({
            node: "spark-2",
            reachable: true,
            memory: { availableKib: 3000000, floorKib: 4194304, belowFloor: true },
            containers: [{ name: "vllm-ray-worker", state: "exited", exitCode: 0, restartCount: 3, starts: 4, maxStarts: 4 }],
        });
        expect(snapshot.hosts[0].containers[1]).toMatchObject({ name: "vllm-serve", stateSeconds: 7109.5, verdict: "healthy" });
        expect(snapshot.ray).toEqual({
            ok: true,
            members: { "spark-1": "192.168.200.12", "spark-2": "192.168.200.13" },
            missing: [],
            strangers: [],
            gpus: 2,
        });
        expect(JSON.stringify(snapshot)).not.toContain("vllm:num_requests_running");
    });

    test("the next refresh: figures over the interval; a host that does not answer is shown as such, in its place", () => {
        const first = snapshotOf(outputs(), [answer("probe-head-0.json"), answer("probe-worker.json")]);
        const ssh = "ssh: connect to host 10.1.230.181 port 22: Connection refused";
        const { snapshot } = snapshotOf(
            outputs(),
            [answer("probe-head-1.json"), { ok: false, seconds: 0.1, unreachable: true, why: `${ssh}\r\n` }],
            first.memory,
        );
        const text = lines(snapshot);
        expect(text).toContain(`spark-2 (worker, aurora@10.1.230.181): UNREACHABLE: ${ssh}`);
        expect(text).toContain(
            "  last 10.0 s: prompt 2400.0 tokens/s, generation 160.0 tokens/s; TTFT p50 1.00 s, p95 2.35 s over 20 requests",
        );
        expect(snapshot.hosts[1]).toMatchObject({ reachable: false, error: ssh, containers: [] });
        expect(snapshot.serving).toMatchObject({ ok: true, window: "interval", seconds: 10, requests: 20 });
        // a replaced server (another container ID) is never compared with the one before it
        const replaced = JSON.parse(answer("probe-head-1.json").stdout);
        replaced.containers[1].id = cid("e");
        const r = snapshotOf(
            outputs(),
            [{ ok: true, seconds: 0.3, stdout: JSON.stringify(replaced) }, answer("probe-worker.json")],
            first.memory,
        );
        expect(r.snapshot.serving.window).toBe("since start");
    });

    test("the head unreachable, no server: said, the rest still shown", () => {
        const down = { ok: false, seconds: 5, unreachable: true, why: "no answer within 5 s" };
        const { snapshot } = snapshotOf(outputs(), [down, answer("probe-worker.json")]);
        const text = lines(snapshot);
        expect(text).toContain("spark-1 (head, aurora@10.1.230.180): UNREACHABLE: no answer within 5 s");
        expect(text).toContain("Ray: the head did not answer");
        expect(text).toContain("Serving: the head did not answer");
        expect(text.some((l) => l.startsWith("  vllm-ray-worker"))).toBe(true);
        const head = JSON.parse(answer("probe-head-0.json").stdout);
        head.metrics = { ok: false, error: "curl: (7) Failed to connect to 127.0.0.1 port 8000: Connection refused" };
        head.ray = { ok: false, text: "ray-members: cannot ask Ray's GCS at 192.168.200.12:6379: timed out" };
        const r = snapshotOf(outputs(), [{ ok: true, seconds: 0.2, stdout: JSON.stringify(head) }, answer("probe-worker.json")]);
        expect(lines(r.snapshot)).toEqual(
            expect.arrayContaining([
                "Ray: cannot ask Ray's GCS at 192.168.200.12:6379: timed out",
                "Serving: curl: (7) Failed to connect to 127.0.0.1 port 8000: Connection refused",
            ]),
        );
    });

    test("Ray: a host missing from Ray, and a member on an address that is no node's fabric IP, are named", () => {
        const head = JSON.parse(answer("probe-head-0.json").stdout);
        head.ray.text = JSON.stringify({
            via: "gcs",
            members: [
                { ip: "10.1.230.181", gpus: 1, head: false },
                { ip: "192.168.200.12", gpus: 1, head: true },
            ],
        });
        const { snapshot } = snapshotOf(outputs(), [{ ok: true, seconds: 0.2, stdout: JSON.stringify(head) }, answer("probe-worker.json")]);
        expect(snapshot.ray).toEqual({
            ok: true,
            members: { "spark-1": "192.168.200.12" },
            missing: ["spark-2 (192.168.200.13)"],
            strangers: ["10.1.230.181"],
            gpus: 2,
        });
        expect(lines(snapshot)).toContain(
            "Ray: 1 member on its fabric IP (spark-1 192.168.200.12), 2 GPUs; MISSING: spark-2 (192.168.200.13); on no node's fabric IP: 10.1.230.181",
        );
    });

    test("backend native: the ranks from the serve containers' labels, no Ray", () => {
        const o = outputs();
        o.status.backend = "native";
        const head = JSON.parse(answer("probe-head-0.json").stdout);
        head.containers = [{ ...head.containers[1], rank: "0" }];
        delete head.ray;
        const worker = JSON.parse(answer("probe-worker.json").stdout);
        worker.containers = [{ ...worker.containers[0], name: "/vllm-serve", role: "serve", rank: "1" }];
        const { snapshot } = snapshotOf(
            o,
            [head, worker].map((j) => ({ ok: true, seconds: 0.2, stdout: JSON.stringify(j) })),
        );
        expect(snapshot.ray).toBeNull();
        expect(lines(snapshot)).toContain("vLLM ranks (backend native): 0 on spark-1 running, 1 on spark-2 exited");
        expect(lines(snapshot).find((l) => l.startsWith("  vllm-serve"))).toMatch(/serve rank 0 +running/);
    });

    test("a hostile host: every string it sends is printable text in the view and in the JSON; its numbers must be numbers", () => {
        const esc = "\x1b[2J\x1b[H\x1b]0;owned\x07\r\x08\x7f\u009b31m\u2028\u2029\u202e\u200b";
        const id = cid("b");
        const hostile = {
            probe: "status",
            node: "spark-1",
            time: 1796378400,
            memory: { totalKib: "lots", availableKib: 1e400 },
            disk: { path: `/models${esc}`, freeBytes: "-1" },
            docker: { ok: true },
            containers: [
                {
                    id,
                    name: `/vllm-serve${esc}`,
                    role: `serve${esc}`,
                    rank: esc,
                    state: `running${esc}`,
                    startedAt: `2026-12-04T08:00:00Z${esc}`,
                    exitCode: "0; rm -rf /",
                    restartCount: { n: 1 },
                    initArgs: [`max-starts=4${esc}`, "max-starts=99999999", "max-starts=12"],
                    initStarts: `${id} 2${esc}`,
                    initStatus: `${id} healthy${esc}`,
                },
                { id: `not-an-id${esc}`, name: 7, initStatus: `not-an-id${esc} healthy` },
            ],
            metrics: { ok: true, text: `vllm:num_requests_running{model_name="m${esc.replace(/"/g, "")}"} 1` },
            ray: { ok: false, text: `ray-members: ${esc}` },
        };
        const ssh = {
            ok: false,
            seconds: 1,
            unreachable: true,
            why: `ssh: banner${esc}\nssh: connect to host 10.1.230.181 port 22: Connection refused${esc}`,
        };
        const { snapshot } = snapshotOf(outputs(), [{ ok: true, seconds: 0.1, stdout: JSON.stringify(hostile) }, ssh]);
        const text = render(snapshot, { header: "h" }) as string;
        for (const l of text.split("\n")) expect(l).not.toMatch(STEERING);
        const json = JSON.stringify(snapshot);
        expect(json).not.toMatch(STEERING);
        // sorted by name: the container whose name is not a string (shown as "") comes first
        expect(JSON.parse(json).hosts[0].containers[1].verdict).toBe(
            "healthy\\x1b[2J\\x1b[H\\x1b]0;owned\\x07\\x0d\\x08\\x7f\\x9b31m\\u{2028}\\u{2029}\\u{202e}\\u{200b}",
        );
        const c = snapshot.hosts[0].containers[1];
        // numbers that are not numbers, a budget line that is not a count, an init argument that is not max-starts=N
        expect(c).toMatchObject({ exitCode: null, restartCount: null, starts: null, maxStarts: 12 });
        expect(snapshot.hosts[0].memory).toMatchObject({ totalKib: null, availableKib: null, belowFloor: false });
        expect(snapshot.hosts[0].disk.freeBytes).toBeNull();
        // a line for a container whose ID is not one is nobody's verdict
        expect(snapshot.hosts[0].containers[0]).toMatchObject({ id: "", name: "", verdict: null });
        expect(snapshot.hosts[1].error).toBe(
            "ssh: connect to host 10.1.230.181 port 22: Connection refused\\x1b[2J\\x1b[H\\x1b]0;owned\\x07\\x0d\\x08\\x7f\\x9b31m\\u{2028}\\u{2029}\\u{202e}\\u{200b}",
        );
    });

    test("answers that are no status: not JSON, for another node, too long a line: said, naming the host", () => {
        const o = outputs();
        const other = JSON.parse(answer("probe-worker.json").stdout);
        const { snapshot } = snapshotOf(o, [
            { ok: true, seconds: 0.1, stdout: "Welcome to Ubuntu\x1b[2J\n" },
            { ok: true, seconds: 0.1, stdout: JSON.stringify({ ...other, node: "spark-9\x1b[H" }) },
        ]);
        const text = lines(snapshot);
        expect(text).toContain("spark-1 (head, aurora@10.1.230.180): no status: its probe answered no JSON: Welcome to Ubuntu\\x1b[2J");
        expect(text).toContain("spark-2 (worker, aurora@10.1.230.181): no status: its probe answered for spark-9\\x1b[H, not spark-2");
        // with --watch every line is cut to the terminal's width
        const cut = (render(snapshot, { header: "h", width: 40 }) as string).split("\n");
        expect(Math.max(...cut.map((l) => l.length))).toBe(40);
        // and to its height: the last line says how many more there are
        const all = (render(snapshot, { header: "h" }) as string).trimEnd().split("\n");
        const short = (render(snapshot, { header: "h", height: 5 }) as string).trimEnd().split("\n");
        expect(short).toEqual([...all.slice(0, 4), `… ${all.length - 4} more lines (a taller terminal shows them)`]);
    });

    test("the watchdog's last restart of a container: shown under the table when the line is that very container's", () => {
        const head = JSON.parse(answer("probe-head-0.json").stdout);
        const serve = head.containers.find((c: { name: string }) => c.name.endsWith("vllm-serve"));
        const ray = head.containers.find((c: { name: string }) => c.name.endsWith("vllm-ray-head"));
        const what = "no completion within 30 s, 3 times: restarted (last: no answer within 30 s)";
        serve.initWatchdog = `${serve.id} 2026-12-07T12:00:05Z ${what}`;
        // a line of another container (one this replaced) is not this one's
        ray.initWatchdog = `${cid("f")} 2026-12-07T11:00:00Z ${what}`;
        const { snapshot } = snapshotOf(outputs(), [{ ok: true, seconds: 0.4, stdout: JSON.stringify(head) }, answer("probe-worker.json")]);
        expect(lines(snapshot)).toContain(`  vllm-serve watchdog's last restart (2026-12-07T12:00:05Z): ${what}`);
        expect(lines(snapshot).filter((l) => l.includes("watchdog"))).toHaveLength(1);
        expect(snapshot.hosts[0].containers.map((c: { watchdog: string | null }) => c.watchdog)).toEqual([
            null,
            `2026-12-07T12:00:05Z ${what}`,
        ]);
    });

    test("the last start, from the stack's launch output: shown when recorded; only numbers and docker's timestamp are taken", () => {
        const started = "2026-12-07T07:28:31.871716179Z";
        const launch = { readySeconds: 36.2, firstCompletionSeconds: 0.41, waitedSeconds: 38.04, startedAt: started };
        const { snapshot } = snapshotOf({ ...outputs(), launch }, [answer("probe-head-0.json"), answer("probe-worker.json")]);
        expect(snapshot.launch).toEqual(launch);
        expect(lines(snapshot)[2]).toBe(
            `last start: ready 36.2 s after the serve container started (${started}); first completion 0.41 s; up waited 38.0 s`,
        );
        // none recorded (a state from before the output existed): no line
        const none = snapshotOf(outputs(), [answer("probe-head-0.json"), answer("probe-worker.json")]).snapshot;
        expect(none.launch).toBeNull();
        expect(lines(none).some((l) => l.startsWith("last start"))).toBe(false);
        // whatever else the outputs hold there is left out
        const odd = { readySeconds: "36\x1b[2J", firstCompletionSeconds: -1, waitedSeconds: 3, startedAt: `${started}\x1b]0;owned\x07` };
        const hostile = snapshotOf({ ...outputs(), launch: odd }, [answer("probe-head-0.json"), answer("probe-worker.json")]).snapshot;
        expect(hostile.launch).toEqual({ waitedSeconds: 3 });
        expect(lines(hostile)[2]).toBe("last start: up waited 3.00 s");
    });
});

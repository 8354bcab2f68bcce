/**
 * setup/timeline.py turns the engine's event log of one operation (`pulumi up --event-log`, or the Automation API's
 * onEvent with `receivedMs` added) into a table and a Gantt chart. The fixtures: an up through the test harness
 * (ms times, creates, both kinds of replacement, same steps, components, a failed readiness wait), an up from the
 * CLI (whole-second timestamps only) and an interrupted first up.
 */
import { spawnSync } from "child_process";
import * as fs from "fs";
import * as os from "os";
import * as path from "path";

const ROOT = path.join(__dirname, "..", "..");
const FIXTURES = path.join(__dirname, "fixtures", "timeline");
const HARNESS = path.join(FIXTURES, "up-harness-ms.jsonl");
const CLI = path.join(FIXTURES, "up-cli-seconds.jsonl");
const INTERRUPTED = path.join(FIXTURES, "up-interrupted.jsonl");
/** Where setup/timeline.sh installs Pillow. */
const PILLOW_DIR = path.join(process.env.XDG_CACHE_HOME || path.join(os.homedir(), ".cache"), "vllm-cluster", "tools", "pillow-11.3.0");

interface Run {
    status: number | null;
    stdout: string;
    stderr: string;
}

function run(cmd: string, args: string[], env: NodeJS.ProcessEnv = {}): Run {
    const r = spawnSync(cmd, args, { cwd: ROOT, encoding: "utf8", env: { ...process.env, ...env }, timeout: 60_000 });
    return { status: r.status, stdout: r.stdout, stderr: r.stderr };
}

const timeline = (args: string[], env: NodeJS.ProcessEnv = {}) => run("python3", ["setup/timeline.py", ...args], env);

interface JsonStep {
    name: string;
    type: string;
    op: string;
    start: number;
    end: number;
    seconds: number;
    failed: boolean;
}

interface JsonTimeline {
    title: string;
    totalSeconds: number;
    steps: JsonStep[];
}

let tmp: string;

beforeAll(() => {
    tmp = fs.mkdtempSync(path.join(os.tmpdir(), "timeline-test-"));
});

afterAll(() => {
    fs.rmSync(tmp, { recursive: true, force: true });
});

function timelineJson(fixture: string, ...extra: string[]): JsonTimeline {
    const out = path.join(tmp, `${path.basename(fixture)}-${extra.join("")}.json`);
    const r = timeline([fixture, "--json", out, ...extra]);
    expect(r.stderr).toBe("");
    expect(r.status).toBe(0);
    return JSON.parse(fs.readFileSync(out, "utf8")) as JsonTimeline;
}

/** Table rows as [start, secs, op, name]: names have no spaces, the last line's is "(whole operation)". */
function tableRows(stdout: string): string[][] {
    return stdout
        .trimEnd()
        .split("\n")
        .slice(2)
        .map((l) => l.trim().split(/\s+/).slice(0, 4));
}

function writeJsonl(name: string, events: object[]): string {
    const file = path.join(tmp, name);
    fs.writeFileSync(file, events.map((e) => JSON.stringify(e)).join("\n") + "\n");
    return file;
}

const fixtureEvents = (file: string): Record<string, unknown>[] =>
    fs
        .readFileSync(file, "utf8")
        .trim()
        .split("\n")
        .map((l) => JSON.parse(l));

describe("setup/timeline.py on an up recorded by the test harness (receivedMs)", () => {
    test("the table: changed custom resources by start, durations from receivedMs, the failed step marked, the total", () => {
        const r = timeline([HARNESS]);
        expect(r.stderr).toBe("");
        expect(r.status).toBe(0);
        expect(r.stdout).toBe(
            [
                "vllm-cluster/harness: 445.7 s wall, 7 steps",
                "   start     secs  op                  name                          type",
                "     1.5      3.2  create              spark-2-preflight             command:local:Command",
                "     4.9     92.5  create              image-spark-2                 pulumi-nodejs:dynamic:Resource",
                "    97.6      6.8  create              ray-worker-spark-2-container  docker:index/container:Container",
                "   104.5     27.3  create-replacement  cluster-ready-probe           pulumi-nodejs:dynamic:Resource",
                "   132.0     10.4  delete-replaced     serve-container               docker:index/container:Container",
                "   142.3      2.6  create-replacement  serve-container               docker:index/container:Container",
                "   145.0    300.2  create-replacement  serve-readiness               pulumi-nodejs:dynamic:Resource  FAILED",
                "     0.0    445.7  total               (whole operation)",
                "",
            ].join("\n"),
        );
    });

    test("--json: the same steps in seconds from the first event, millisecond precision, failed flagged", () => {
        const tl = timelineJson(HARNESS);
        expect(tl.title).toBe("vllm-cluster/harness");
        expect(tl.totalSeconds).toBe(445.651);
        const step = (name: string, op: string, start: number, end: number, seconds: number, type: string, failed = false) => ({
            name,
            type,
            op,
            start,
            end,
            seconds,
            failed,
        });
        const [cmd, dyn, ctr] = ["command:local:Command", "pulumi-nodejs:dynamic:Resource", "docker:index/container:Container"];
        expect(tl.steps).toEqual([
            step("spark-2-preflight", "create", 1.452, 4.633, 3.181, cmd),
            step("image-spark-2", "create", 4.903, 97.412, 92.509, dyn),
            step("ray-worker-spark-2-container", "create", 97.611, 104.383, 6.772, ctr),
            step("cluster-ready-probe", "create-replacement", 104.517, 131.826, 27.309, dyn),
            step("serve-container", "delete-replaced", 131.957, 142.311, 10.354, ctr),
            step("serve-container", "create-replacement", 142.329, 144.917, 2.588, ctr),
            step("serve-readiness", "create-replacement", 145.006, 445.213, 300.207, dyn, true),
        ]);
    });

    test("--all adds components, plumbing, same steps and the replace markers; unfinished components show (no end)", () => {
        const r = timeline([HARNESS, "--all"]);
        expect(r.status).toBe(0);
        expect(r.stdout.split("\n")[0]).toBe("vllm-cluster/harness: 445.7 s wall, 24 steps");
        const rows = tableRows(r.stdout);
        const names = rows.map((row) => `${row[3]} (${row[2]})`);
        for (const n of [
            "spark-2 (create)",
            "spark-1-docker (same)",
            "api-key (same)",
            "cluster-ready-probe (replace)",
            "serve-container (replace)",
        ]) {
            expect(names).toContain(n);
        }
        // the stack and the serve component never registered their outputs: the operation failed
        const lines = r.stdout.split("\n");
        expect(lines.filter((l) => l.endsWith("(no end)")).map((l) => l.trim().split(/\s+/)[3])).toEqual(["vllm-cluster-harness", "serve"]);
        expect(rows.map((row) => Number(row[0])).slice(0, -1)).toEqual(
            rows
                .map((row) => Number(row[0]))
                .slice(0, -1)
                .sort((a, b) => a - b),
        );
        // a component spans its children: ray-worker-spark-2 ends when its container is created
        expect(rows.find((row) => row[3] === "ray-worker-spark-2")?.slice(0, 3)).toEqual(["1.8", "102.6", "create"]);
    });

    test("--title replaces the project/stack title", () => {
        const r = timeline([HARNESS, "--title", "second up, node spark-2 added"]);
        expect(r.stdout.split("\n")[0]).toBe("second up, node spark-2 added: 445.7 s wall, 7 steps");
        expect(timelineJson(HARNESS, "--title", "t").title).toBe("t");
    });
});

describe("setup/timeline.py on CLI event logs (whole-second timestamps)", () => {
    test("an up with updates and replacements: delete-replaced first for the containers, last for the readiness check", () => {
        const r = timeline([CLI]);
        expect(r.status).toBe(0);
        expect(r.stdout.split("\n")[0]).toBe("vllm-cluster/local-native: 153.0 s wall, 8 steps");
        expect(tableRows(r.stdout)).toEqual([
            ["2.0", "42.0", "update", "image-spark-1"],
            ["2.0", "39.0", "update", "image-spark-2"],
            ["44.0", "1.0", "delete-replaced", "serve-rank-1-container"],
            ["45.0", "11.0", "delete-replaced", "serve-rank-0-container"],
            ["56.0", "2.0", "create-replacement", "serve-rank-0-container"],
            ["58.0", "1.0", "create-replacement", "serve-rank-1-container"],
            ["59.0", "92.0", "create-replacement", "serve-readiness"],
            ["152.0", "0.0", "delete-replaced", "serve-readiness"],
            ["0.0", "153.0", "total", "(whole"],
        ]);
        expect(r.stdout).not.toMatch(/FAILED|no end/);
    });

    test("an interrupted up: the step that never ended is shown as (no end), ending at the last event", () => {
        const r = timeline([INTERRUPTED]);
        expect(r.status).toBe(0);
        const lines = r.stdout.trimEnd().split("\n");
        expect(lines[0]).toBe("vllm-cluster/local: 63.0 s wall, 3 steps");
        expect(lines[4]).toBe("     5.0     58.0  create              image-spark-1      pulumi-nodejs:dynamic:Resource  (no end)");
        expect(lines.filter((l) => l.includes("(no end)"))).toHaveLength(1);
        const tl = timelineJson(INTERRUPTED);
        expect(tl.steps.find((s) => s.name === "image-spark-1")).toMatchObject({ start: 5, end: 63, seconds: 58, failed: false });
    });

    test("preview events (planning) are ignored when the file also has the update's, used when it has nothing else", () => {
        const update = fixtureEvents(CLI);
        const preview = update
            .filter((e) => e.resourcePreEvent || e.resOutputsEvent)
            .map((e) => {
                const key = e.resourcePreEvent ? "resourcePreEvent" : "resOutputsEvent";
                return { timestamp: (e.timestamp as number) - 30, [key]: { ...(e[key] as object), planning: true } };
            });
        const both = timelineJson(writeJsonl("preview-then-update.jsonl", [...preview, ...update]));
        const alone = timelineJson(CLI);
        expect(both.totalSeconds).toBe(183);
        expect(both.steps.map((s) => ({ ...s, start: s.start - 30, end: s.end - 30 }))).toEqual(alone.steps);
        const previewOnly = timelineJson(writeJsonl("preview-only.jsonl", preview));
        expect(previewOnly.steps.map((s) => s.name)).toEqual(alone.steps.map((s) => s.name));
    });
});

describe("setup/timeline.py errors: exit 2, one line naming the file", () => {
    const expectError = (r: Run, pattern: RegExp) => {
        expect(r.status).toBe(2);
        expect(r.stdout).toBe("");
        expect(r.stderr.trimEnd().split("\n")).toHaveLength(1);
        expect(r.stderr).toMatch(pattern);
    };

    test("a missing file", () => {
        const missing = path.join(tmp, "no-such-events.jsonl");
        expectError(timeline([missing]), new RegExp(`^timeline: ${missing}: no such file`));
    });

    test("an empty file, and one with blank lines only", () => {
        expectError(timeline([writeJsonl("empty.jsonl", [])]), /empty\.jsonl: empty file/);
        const blank = path.join(tmp, "blank.jsonl");
        fs.writeFileSync(blank, "\n  \n\n");
        expectError(timeline([blank]), /blank\.jsonl: empty file/);
    });

    test("a malformed line is named by its number", () => {
        const lines = fs.readFileSync(HARNESS, "utf8").split("\n");
        lines.splice(4, 0, '{"sequence": 99, "timestamp": 1767261601, "resourcePreEvent": {"metadata": ');
        const bad = path.join(tmp, "truncated.jsonl");
        fs.writeFileSync(bad, lines.join("\n"));
        expectError(timeline([bad]), /truncated\.jsonl: line 5: not JSON/);
        const untimed = writeJsonl("untimed.jsonl", [
            { sequence: 0, timestamp: 1 },
            { sequence: 1, preludeEvent: {} },
        ]);
        expectError(timeline([untimed]), /untimed\.jsonl: line 2: not an engine event with a timestamp/);
    });

    test("a file with no resource events", () => {
        const f = writeJsonl("no-resources.jsonl", [
            { sequence: 0, timestamp: 1767261600, preludeEvent: { config: {} } },
            { sequence: 1, timestamp: 1767261601, summaryEvent: { durationSeconds: 1, resourceChanges: {} } },
            { sequence: 2, timestamp: 1767261601, cancelEvent: {} },
        ]);
        expectError(timeline([f]), /no-resources\.jsonl: no resource events/);
    });
});

describe("setup/timeline.sh", () => {
    test("without --png it runs the table and installs nothing", () => {
        const cache = path.join(tmp, "cache");
        const r = run("bash", ["setup/timeline.sh", CLI], { XDG_CACHE_HOME: cache });
        expect(r.status).toBe(0);
        expect(r.stdout).toBe(timeline([CLI]).stdout);
        expect(fs.existsSync(path.join(cache, "vllm-cluster"))).toBe(false);
    });
});

describe("setup/timeline.py --png (Pillow from setup/timeline.sh's cache)", () => {
    // Never skipped: a cold cache installs Pillow here, exactly as a user's first --png does.
    beforeAll(() => {
        const r = spawnSync("bash", ["setup/timeline.sh", CLI, "--png", path.join(tmp, "install.png")], {
            cwd: ROOT,
            encoding: "utf8",
            timeout: 300_000,
        });
        if (r.status !== 0) {
            throw new Error(`setup/timeline.sh could not install Pillow into ${PILLOW_DIR}: ${r.stderr}`);
        }
        expect(
            run("python3", ["-c", "from PIL import ImageFont; ImageFont.load_default(size=13)"], { PYTHONPATH: PILLOW_DIR }).status,
        ).toBe(0);
    }, 320_000);

    test("a PNG 1200 px wide, 22 px a row for each step and the total, plus the title/axis margins", () => {
        for (const [extra, steps] of [
            [[], 7],
            [["--all"], 24],
        ] as [string[], number][]) {
            const out = path.join(tmp, `harness${extra.join("")}.png`);
            const r = timeline([HARNESS, "--png", out, ...extra], { PYTHONPATH: PILLOW_DIR });
            expect(r.stderr).toBe("");
            expect(r.status).toBe(0);
            const png = fs.readFileSync(out);
            expect([...png.subarray(0, 8)]).toEqual([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]);
            expect(png.subarray(12, 16).toString("ascii")).toBe("IHDR");
            expect(png.readUInt32BE(16)).toBe(1200);
            expect(png.readUInt32BE(20)).toBe(84 + 22 * (steps + 1) + 34);
        }
    });
});

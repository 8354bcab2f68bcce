/**
 * infra/scripts/container_init.sh, PID 1 of every project container, run as a file by this machine's sh (dash, as
 * in the image) around small commands: the crash budget kept on disk, the memory floor at start and while running,
 * a stop signal passed on (exit 143, so the engine restarts it after a reboot), preconditions waited for without
 * spending the budget. The OOM kill under a ceiling needs a container's cgroup: the fault suite checks it for real.
 */
import { spawn, spawnSync } from "child_process";
import * as fs from "fs";
import * as net from "net";
import * as os from "os";
import * as path from "path";
import { exited, until } from "./waits";

const SCRIPT = path.join(__dirname, "..", "..", "infra", "scripts", "container_init.sh");

let dir: string;
beforeEach(() => {
    dir = fs.mkdtempSync(path.join(os.tmpdir(), "vcl-init-"));
});
afterEach(() => fs.rmSync(dir, { recursive: true, force: true }));

/** The script's arguments for a container "c" on node "n" with its state in the test's directory. */
function initArgs(extra: string[], command: string): string[] {
    return [SCRIPT, "name=c", "node=n", `state-dir=${dir}`, ...extra, "--", "sh", "-c", command];
}

function runInit(extra: string[], command: string) {
    const r = spawnSync("sh", initArgs(extra, command), { encoding: "utf8", timeout: 30_000 });
    return { status: r.status, stderr: r.stderr, verdict: fs.readFileSync(path.join(dir, "c.status"), "utf8").trim() };
}

function memAvailableKib(): number {
    const m = /^MemAvailable:\s+(\d+)/m.exec(fs.readFileSync("/proc/meminfo", "utf8"));
    if (!m) throw new Error("no MemAvailable in /proc/meminfo");
    return Number(m[1]);
}

/**
 * A command that stays up until the init has given its start back (its starts file ends in " 0"), at most `seconds`,
 * then exits with `code`: on a loaded machine a fixed sleep can end before the init looks (npm test runs the unit
 * tests beside the clusters). When the init never gives the start back, the command ends after `seconds` and the
 * test's expectation on the starts file fails.
 */
function upUntilBudgetBack(code: number, seconds = 30): string {
    const starts = path.join(dir, "c.starts");
    return `i=0; until grep -q ' 0$' '${starts}' 2>/dev/null || [ $i -ge ${seconds * 10} ]; do sleep 0.1; i=$((i + 1)); done; exit ${code}`;
}

describe("crash budget", () => {
    test("a command that keeps failing runs max-starts times; the next start is refused with a clean exit", () => {
        const ran = path.join(dir, "ran");
        const cmd = `echo x >> ${ran}; exit 3`;
        for (let i = 1; i <= 3; i++) {
            const r = runInit(["max-starts=3"], cmd);
            expect(r.status).toBe(3);
            expect(r.verdict).toMatch(new RegExp(`exited with 3 \\(start ${i} of at most 3\\)$`));
        }
        const last = runInit(["max-starts=3"], cmd);
        // exit 0: Docker's on-failure policy restarts neither it nor, after the engine restarts, a clean exit
        expect(last.status).toBe(0);
        expect(last.verdict).toMatch(/crash budget exhausted: 3 starts without becoming healthy \(at most 3/);
        expect(last.stderr).toContain("the container stays stopped");
        expect(fs.readFileSync(ran, "utf8").trim().split("\n")).toHaveLength(3);
    });

    test("a command that ends by itself with 0 failed all the same (vLLM's server does once its engine died): restarted within the budget", () => {
        const r = runInit(["max-starts=2"], "exit 0");
        expect(r.status).toBe(1);
        expect(r.verdict).toMatch(/exited with 0 \(start 1 of at most 2\)$/);
    });

    test("the budget is kept on disk: a run in a new process (as after a reboot) continues the count", () => {
        fs.writeFileSync(path.join(dir, "c.starts"), "unknown 2\n");
        expect(runInit(["max-starts=3"], "exit 1").verdict).toMatch(/start 3 of at most 3/);
        expect(runInit(["max-starts=3"], "exit 1").verdict).toMatch(/crash budget exhausted/);
    });

    test("another container's count (a replaced container) is not this one's: a fresh budget", () => {
        // this machine is no container: its ID reads as "unknown", so any other ID is another container
        fs.writeFileSync(path.join(dir, "c.starts"), `${"a".repeat(64)} 3\n`);
        const r = runInit(["max-starts=3"], "exit 5");
        expect(r.status).toBe(5);
        expect(r.verdict).toMatch(/start 1 of at most 3/);
    });

    test("a command that stayed up stable-seconds gets its budget back", () => {
        // three failing runs under a budget of two: only possible because each one stayed up long enough
        for (let i = 0; i < 3; i++) {
            const r = runInit(["max-starts=2", "stable-seconds=1"], upUntilBudgetBack(4));
            expect(r.status).toBe(4);
        }
        expect(fs.readFileSync(path.join(dir, "c.starts"), "utf8").trim()).toBe("unknown 0");
    });

    test("a command that became healthy (its URL answered 200) gets its budget back", async () => {
        const server = (await import("http")).createServer((_, res) => res.end("ok"));
        await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
        const port = (server.address() as net.AddressInfo).port;
        try {
            const p = spawn("sh", initArgs(["max-starts=1", `healthy-url=http://127.0.0.1:${port}/health`], upUntilBudgetBack(6)));
            expect(await exited(p)).toBe(6);
            expect(fs.readFileSync(path.join(dir, "c.starts"), "utf8").trim()).toBe("unknown 0");
            // with max-starts=1 a second start is possible only because the first became healthy
            expect(runInit(["max-starts=1"], "exit 6").verdict).toMatch(/exited with 6 \(start 1 of at most 1\)/);
        } finally {
            server.close();
        }
    });

    test("no writable state directory: refuses to start (fails closed), the command never runs", () => {
        const ran = path.join(dir, "ran");
        const r = spawnSync(
            "sh",
            [SCRIPT, "name=c", "node=n", `state-dir=${dir}/missing`, "max-starts=3", "--", "sh", "-c", `touch ${ran}`],
            {
                encoding: "utf8",
            },
        );
        expect(r.status).toBe(0);
        expect(r.stderr).toContain("refusing to start without a crash budget");
        expect(fs.existsSync(ran)).toBe(false);
    });

    test("malformed or missing arguments are refused with usage, before anything runs", () => {
        const bad = spawnSync("sh", [SCRIPT, "name=c", "node=n", `state-dir=${dir}`, "max-starts=3x", "--", "true"], { encoding: "utf8" });
        expect(bad.status).toBe(64);
        expect(bad.stderr).toContain("whole numbers");
        const unknown = spawnSync("sh", [SCRIPT, "nme=c", "--", "true"], { encoding: "utf8" });
        expect(unknown.status).toBe(64);
        expect(unknown.stderr).toContain("unknown argument: nme=c");
    });
});

describe("memory floor", () => {
    test("below the floor at start (after its grace): not started, a clean exit, the verdict names MemAvailable and the floor", () => {
        const ran = path.join(dir, "ran");
        const r = runInit(["max-starts=3", `min-available-kib=${memAvailableKib() * 4}`, "floor-grace-seconds=2"], `touch ${ran}`);
        expect(r.status).toBe(0);
        expect(r.verdict).toMatch(
            /memory guard: not started: MemAvailable [\d.]+ GiB is below the floor of [\d.]+ GiB \(memoryGuard.minAvailable\)/,
        );
        expect(fs.existsSync(ran)).toBe(false);
        // the refused start spent nothing
        expect(fs.existsSync(path.join(dir, "c.starts"))).toBe(false);
    });

    test("MemAvailable falling below the floor while it runs kills the whole command and stops for good", async () => {
        // the floor 0.5 GiB under what is free now; the command then takes 2 GiB (and a child that would outlive it)
        const floor = memAvailableKib() - 512 * 1024;
        const child = path.join(dir, "child-alive");
        const take = `sh -c 'while :; do touch ${child}; sleep 0.2; done' & python3 -c "import time; b = b'x' * (2 << 30); time.sleep(60)"`;
        const p = spawn("sh", initArgs(["max-starts=3", `min-available-kib=${floor}`, "check-seconds=1"], take));
        const code = await exited(p);
        expect(code).toBe(0);
        const verdict = fs.readFileSync(path.join(dir, "c.status"), "utf8");
        expect(verdict).toMatch(/memory guard: stopped: MemAvailable [\d.]+ GiB is below the floor/);
        // the command's whole process group is gone: its background child no longer touches its file
        fs.rmSync(child, { force: true });
        await new Promise((r) => setTimeout(r, 600));
        expect(fs.existsSync(child)).toBe(false);
    }, 60_000);
});

describe("signals and preconditions", () => {
    test("a stop signal reaches the command and the container exits 143 (the engine restarts it after a reboot)", async () => {
        const got = path.join(dir, "got-term");
        const p = spawn("sh", initArgs(["max-starts=3"], `trap 'touch ${got}; exit 0' TERM; while :; do sleep 0.1; done`));
        await until(() => fs.readFileSync(path.join(dir, "c.status"), "utf8").includes("start 1"), "the start");
        await new Promise((r) => setTimeout(r, 300));
        p.kill("SIGTERM");
        expect(await exited(p)).toBe(143);
        expect(fs.existsSync(got)).toBe(true);
        expect(fs.readFileSync(path.join(dir, "c.status"), "utf8")).toContain("stopped by a signal");
    });

    test("waits for a TCP port without spending the budget, then starts", async () => {
        const hold = net.createServer();
        await new Promise<void>((r) => hold.listen(0, "127.0.0.1", r));
        const port = (hold.address() as net.AddressInfo).port;
        await new Promise<void>((r) => hold.close(() => r()));
        const ran = path.join(dir, "ran");
        const p = spawn("sh", initArgs(["max-starts=1", `wait-tcp=127.0.0.1:${port}`], `touch ${ran}`));
        let stderr = "";
        p.stderr?.on("data", (d: Buffer) => (stderr += d.toString()));
        await until(() => stderr.includes("waiting for its preconditions (TCP 127.0.0.1:"), "the wait");
        expect(fs.existsSync(ran)).toBe(false);
        expect(fs.existsSync(path.join(dir, "c.starts"))).toBe(false);
        const server = net.createServer((s) => s.end());
        await new Promise<void>((r) => server.listen(port, "127.0.0.1", r));
        try {
            // touch ended by itself, which for a service is a failure (restarted within its budget)
            expect(await exited(p)).toBe(1);
            expect(fs.existsSync(ran)).toBe(true);
            expect(stderr).toContain("preconditions met");
        } finally {
            server.close();
        }
    }, 30_000);

    test("a stop signal while waiting ends the wait with 143, nothing started", async () => {
        const ran = path.join(dir, "ran");
        const p = spawn(
            "sh",
            initArgs(["max-starts=1", "wait-python=" + Buffer.from("import sys; sys.exit(1)").toString("base64")], `touch ${ran}`),
        );
        let stderr = "";
        p.stderr?.on("data", (d: Buffer) => (stderr += d.toString()));
        await until(() => stderr.includes("waiting for its preconditions (a check of the Ray cluster)"), "the wait");
        p.kill("SIGTERM");
        expect(await exited(p)).toBe(143);
        expect(fs.existsSync(ran)).toBe(false);
    }, 30_000);
});

describe("the state directory is shared with the node's other containers", () => {
    /** What another (compromised) container of the node may plant there: links to files outside, and a FIFO. */
    function plant(name: string): string {
        const victim = path.join(dir, "outside", name);
        fs.mkdirSync(path.dirname(victim), { recursive: true });
        // a count that would exhaust the budget of this very container, were it read through the link
        fs.writeFileSync(victim, "unknown 99\n");
        fs.symlinkSync(victim, path.join(dir, name));
        return victim;
    }
    const untouched = (victims: string[]) => victims.filter((v) => fs.readFileSync(v, "utf8") !== "unknown 99\n");

    test("links planted at every name the init writes or reads, and at its old predictable temporary names, are never followed", async () => {
        const victims = ["c.status", "c.starts", "c.wait", "c.guard"].map(plant);
        const ran = path.join(dir, "ran");
        const flag = path.join(dir, "go");
        const check =
            "import os, sys\nprint('waiting for', sys.argv[1], file=sys.stderr)\nsys.exit(0 if os.path.exists(sys.argv[1]) else 1)";
        const p = spawn(
            "sh",
            initArgs(
                ["max-starts=2", `wait-python=${Buffer.from(check).toString("base64")}`, `wait-arg=${flag}`],
                `touch ${ran}; sleep 30`,
            ),
        );
        let stderr = "";
        p.stderr?.on("data", (d: Buffer) => (stderr += d.toString()));
        await until(() => stderr.includes("waiting for its preconditions"), "the wait");
        // the temporary names a shell's $$ made (1 in every container): planted while it waits
        victims.push(...["c.status.tmp.", "c.starts.tmp."].map((n) => plant(`${n}${p.pid}`)));
        await new Promise((r) => setTimeout(r, 2500));
        fs.writeFileSync(flag, "");
        await until(() => fs.existsSync(ran), "the command to start");
        await until(() => fs.readFileSync(path.join(dir, "c.status"), "utf8").includes("start 1 of at most 2"), "the verdict");
        p.kill("SIGTERM");
        expect(await exited(p)).toBe(143);
        expect(untouched(victims)).toEqual([]);
        // its own files are regular files again, readable by the host's login user (the umask's mode), with its text
        for (const f of ["c.status", "c.starts", "c.wait"]) {
            const st = fs.lstatSync(path.join(dir, f));
            expect([f, st.isFile(), st.mode & 0o777]).toEqual([f, true, 0o666 & ~process.umask()]);
        }
        expect(fs.readFileSync(path.join(dir, "c.starts"), "utf8")).toBe("unknown 1\n");
        expect(fs.readFileSync(path.join(dir, "c.wait"), "utf8")).toContain(`waiting for ${flag}`);
        // no temporary file left behind
        expect(fs.readdirSync(dir).filter((f) => f.startsWith(".c."))).toEqual([]);
    }, 30_000);

    test("a FIFO planted as its budget file does not hang it: read as no count", () => {
        spawnSync("mkfifo", [path.join(dir, "c.starts")]);
        const r = runInit(["max-starts=1"], "exit 3");
        expect(r.verdict).toBe("unknown exited with 3 (start 1 of at most 1)");
        expect(fs.lstatSync(path.join(dir, "c.starts")).isFile()).toBe(true);
    });
});

/**
 * The scripts a person runs from a terminal (setup/, tests/, bench/) never put a command under GNU `timeout` without
 * --foreground: timeout runs its command in a process group of its own, outside the terminal's foreground group, so
 * the first terminal change the command makes (apt-get and dpkg make one) stops it with SIGTTOU, and the run hangs
 * until the limit kills it. A line that cannot touch a terminal (it runs on a host over ssh, say) may keep plain
 * timeout with a `no-tty:` comment on that line or the one above, saying why. tests/testbed/terminal.sh runs the
 * first run's steps in a real pseudo-terminal; this is the static half.
 */
import { spawnSync } from "child_process";
import * as fs from "fs";
import * as path from "path";

const ROOT = path.join(__dirname, "..", "..");

/** `timeout` followed by its options and a duration (a number or a shell expansion): the command form, not a word in prose. */
const TIMEOUT_CMD = /(^|[\s;&|(`"'])timeout(\s+-[-A-Za-z=0-9]+)*\s+(\d|\$)/;

/** Lines of `text` that run a command under timeout without --foreground and without a `no-tty:` reason. */
export function unguardedTimeouts(text: string): number[] {
    const lines = text.split("\n");
    const out: number[] = [];
    lines.forEach((line, i) => {
        const code = line.replace(/^\s*(#|\/\/|\*).*$/, "");
        if (!TIMEOUT_CMD.test(code) || /\btimeout\s(\s*-[-A-Za-z=]+(\s+\d+\S*)?)*\s*--foreground\b/.test(code)) return;
        if (/no-tty:/.test(line) || /no-tty:/.test(lines[i - 1] ?? "")) return;
        out.push(i + 1);
    });
    return out;
}

function trackedScripts(): string[] {
    const r = spawnSync("git", ["ls-files", "setup", "tests", "bench", ".ci"], { cwd: ROOT, encoding: "utf8" });
    if (r.status !== 0) throw new Error(`git ls-files failed: ${r.stderr}`);
    return r.stdout
        .split("\n")
        .filter((f) => f !== "" && !f.startsWith("tests/unit/fixtures/"))
        .filter((f) => /\.(sh|bash|js)$/.test(f) || f === "tests/testbed/testbed" || f === ".ci/run");
}

test("the rule finds timeout without --foreground, and accepts --foreground or a no-tty reason", () => {
    expect(unguardedTimeouts("timeout 1200 apt-get install -y x")).toEqual([1]);
    expect(unguardedTimeouts("x=1\nDEBIAN_FRONTEND=noninteractive timeout -k 5 $((n * 60)) apt-get update")).toEqual([2]);
    expect(unguardedTimeouts("timeout --foreground 1200 apt-get install -y x")).toEqual([]);
    expect(unguardedTimeouts("timeout -k 5 --foreground 10 cmd")).toEqual([]);
    expect(unguardedTimeouts("# no-tty: runs on the host over ssh\ntimeout 5 bash -c x")).toEqual([]);
    expect(unguardedTimeouts("timeout 5 bash -c x # no-tty: on the host")).toEqual([]);
    expect(unguardedTimeouts("# a timeout 5 in prose\nconst timeoutMs = 5; spawnSync(x, { timeout: 5 })")).toEqual([]);
});

test("no script a person runs puts a command under timeout without --foreground", () => {
    const found: string[] = [];
    for (const f of trackedScripts()) {
        for (const n of unguardedTimeouts(fs.readFileSync(path.join(ROOT, f), "utf8"))) found.push(`${f}:${n}`);
    }
    expect(found).toEqual([]);
});

/**
 * `npm run status -- --watch` in a pseudo-terminal (util-linux `script`), against stand-in hosts whose /metrics
 * moves between refreshes and whose init files carry terminal controls: the view redraws in place (home, each line
 * cleared to its end, the rest of the screen cleared), shows the interval's rates from the second refresh on, lets
 * no host-supplied control reach the terminal, and Ctrl-C shows the cursor again.
 */
import { spawn } from "child_process";
import * as fs from "fs";
import * as path from "path";
import { FIXTURES, ROOT, cid, outputsOf, script, standInClient, tempState, twoHosts } from "./statusHosts";

/** The only control sequences the view itself writes. */
const OURS = ["\x1b[?25l", "\x1b[?25h", "\x1b[H", "\x1b[K", "\x1b[J"];

let state: string;
beforeEach(() => (state = tempState("vcl-status-watch-")));
afterEach(() => fs.rmSync(state, { recursive: true, force: true }));

/** Polls `cond` every 50 ms; throws naming `what` after `ms`. */
async function until(what: string, cond: () => boolean, ms: number): Promise<void> {
    for (const deadline = Date.now() + ms; !cond();) {
        if (Date.now() > deadline) throw new Error(`${what}: not within ${ms} ms`);
        await new Promise((r) => setTimeout(r, 50));
    }
}

test("--watch redraws in place, rates from the second refresh on, no host control on the screen, Ctrl-C restores the cursor", async () => {
    const [head, worker] = twoHosts(state);
    // /metrics: metrics-0 at the first refresh, metrics-1 from the second on (20 more requests in between)
    const n = path.join(head.dir, "n");
    script(
        path.join(head.bin, "curl"),
        `echo x >> ${JSON.stringify(n)}; if [ "$(wc -l < ${JSON.stringify(n)})" -le 1 ]; then cat ${JSON.stringify(path.join(FIXTURES, "metrics-0.txt"))}; else cat ${JSON.stringify(path.join(FIXTURES, "metrics-1.txt"))}; fi`,
    );
    // a host that tries to clear the screen, move the cursor home and write there, through its init's verdict
    fs.writeFileSync(path.join(worker.init, "vllm-ray-worker.status"), `${cid("c")} exited\x1b[2J\x1b[H\x1b[31mOWNED\r\u009b2J\u2028\n`);
    const client = standInClient(
        state,
        { "root@10.231.0.11": { bin: head.bin }, "root@10.231.0.12": { bin: worker.bin } },
        { outputs: outputsOf(state) },
    );
    const cmd = `exec node ${JSON.stringify(path.join(ROOT, "setup", "status.js"))} --stack test --watch --interval 0.5`;
    const env = { ...process.env, PATH: `${client.bin}:${process.env.PATH}`, XDG_CACHE_HOME: path.join(state, "cache"), TERM: "xterm" };
    // -e: the command's exit status; -q: no start and end lines; /dev/null: no typescript file
    const term = spawn("script", ["-qec", cmd, "/dev/null"], { cwd: ROOT, env, stdio: ["pipe", "pipe", "pipe"] });
    let screen = "";
    term.stdout.on("data", (d) => (screen += d.toString()));
    const exited = new Promise<number | null>((resolve) => term.on("close", resolve));
    try {
        // two frames drawn, the second with the interval's figures
        await until("two refreshes of the view", () => screen.split("\x1b[H").length > 3 && /last \d+\.\d+ s: prompt/.test(screen), 20_000);
        term.stdin.write("\x03");
        let timer: NodeJS.Timeout | undefined;
        const late = new Promise<string>((r) => (timer = setTimeout(() => r("no exit within 10 s of Ctrl-C"), 10_000)));
        const code = await Promise.race([exited, late]);
        clearTimeout(timer);
        expect(code).toBe(130);
    } finally {
        term.kill("SIGKILL");
    }
    // the cursor hidden first, shown again last
    expect(screen.startsWith("\x1b[?25l")).toBe(true);
    expect(screen.trimEnd().endsWith("\x1b[?25h")).toBe(true);
    // every control sequence on the screen is the view's own; no raw C1, no line separator, no lone carriage return
    const sequences = new Set(screen.match(/\x1b(\[[0-9;?]*[A-Za-z]|\][^\x07]*\x07|.)/g) ?? []);
    expect([...sequences].filter((s) => !OURS.includes(s))).toEqual([]);
    expect(screen).not.toMatch(/[\u0080-\u009f\u2028\u2029]|\r(?!\n)/);
    // the last frame, as the terminal shows it: each line cleared to its end, the rest of the screen cleared (then
    // the terminal's echo of Ctrl-C and the cursor shown)
    const frames = screen.replace(/(\^C)?\x1b\[\?25h\r\n$/, "").split("\x1b[H");
    const last = frames[frames.length - 1];
    expect(last.endsWith("\x1b[J")).toBe(true);
    const rows = last.replace(/\x1b\[J$/, "").split("\r\n");
    expect(rows.slice(0, -1).every((r) => r.endsWith("\x1b[K"))).toBe(true);
    const shown = rows.map((r) => r.replace(/\x1b\[K$/, ""));
    expect(shown[0]).toMatch(/^vllm-cluster status at .* UTC, every 0\.5 s \(asked in \d+\.\d s\); Ctrl-C ends$/);
    expect(shown.some((r) => /^spark-2 \(worker, root@10\.231\.0\.12\): answered in \d+\.\d s$/.test(r))).toBe(true);
    expect(shown.find((r) => r.startsWith("  vllm-ray-worker"))).toContain("exited\\x1b[2J\\x1b[H\\x1b[31mOWNED\\x0d\\x9b2J\\u{2028}");
    expect(shown.find((r) => r.startsWith("  last "))).toMatch(
        /^ {2}last \d+\.\d+ s: prompt \d+\.\d tokens\/s, generation \d+\.\d tokens\/s; TTFT p50 1\.00 s, p95 2\.35 s over 20 requests$/,
    );
    // one ssh session per host and refresh drawn (and perhaps one for a refresh Ctrl-C cut short)
    const drawn = frames.length - 2;
    for (const host of ["root@10.231.0.11", "root@10.231.0.12"]) {
        const sessions = client.log().filter((l) => l === `ssh ${host}`).length;
        expect(sessions).toBeGreaterThanOrEqual(drawn);
        expect(sessions).toBeLessThanOrEqual(drawn + 1);
    }
}, 60_000);

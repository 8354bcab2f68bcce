/**
 * infra/scripts/serve_watchdog.py, the serve watchdog's probe, run by this machine's python3 as the serve container's
 * init runs it, against an HTTP server in this test that plays vLLM's API: answering, hung, failing, refusing the key,
 * and busy for others (its generated-token count grows while the probe's own completion waits).
 */
import { execFile, spawn, spawnSync } from "child_process";
import * as fs from "fs";
import * as http from "http";
import * as net from "net";
import * as os from "os";
import * as path from "path";
import { exited, until } from "./waits";

const SCRIPT = path.join(__dirname, "..", "..", "infra", "scripts", "serve_watchdog.py");
const KEY = "sk-watchdog-test-key";

type Mode = "ok" | "hang" | "500" | "401" | "busy" | "no-choices";
let mode: Mode = "ok";
let generated = 100;
const seen: { path: string; auth: string | undefined; body: string }[] = [];
let server: http.Server;
let port = 0;
let dir: string;
let keyFile: string;

beforeAll(async () => {
    server = http.createServer((req, res) => {
        let body = "";
        req.on("data", (d: Buffer) => (body += d.toString()));
        req.on("end", () => {
            seen.push({ path: req.url ?? "", auth: req.headers.authorization, body });
            if (req.url === "/metrics") {
                res.end(`# HELP x\nvllm:generation_tokens_total{model_name="m"} ${generated}\nvllm:num_requests_running 1\n`);
                return;
            }
            if (req.headers.authorization !== `Bearer ${KEY}` || mode === "401") {
                res.statusCode = 401;
                res.end('{"error":"Unauthorized"}');
                return;
            }
            if (mode === "hang") return; // never answers
            if (mode === "busy") {
                generated += 50; // tokens for other clients while this one waits
                return;
            }
            if (mode === "500") {
                res.statusCode = 500;
                res.end('{"error":"EngineDeadError"}');
                return;
            }
            res.setHeader("Content-Type", "application/json");
            res.end(mode === "no-choices" ? "{}" : '{"choices":[{"message":{"content":"p"}}]}');
        });
    });
    await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
    port = (server.address() as net.AddressInfo).port;
});
afterAll(async () => {
    server.closeAllConnections();
    await new Promise((r) => server.close(r));
});
beforeEach(() => {
    dir = fs.mkdtempSync(path.join(os.tmpdir(), "vcl-watchdog-"));
    keyFile = path.join(dir, "api-key");
    fs.writeFileSync(keyFile, `${KEY}\n`, { mode: 0o600 });
    seen.length = 0;
    mode = "ok";
});
afterEach(() => fs.rmSync(dir, { recursive: true, force: true }));

function probe(arg: object, timeout = "1"): Promise<{ code: number; out: string }> {
    return new Promise((resolve) => {
        execFile("python3", [SCRIPT, JSON.stringify(arg), timeout], { timeout: 20_000 }, (err, stdout) => {
            const code = err ? ((err as { code?: number }).code ?? -1) : 0;
            resolve({ code: typeof code === "number" ? code : -1, out: stdout.trim() });
        });
    });
}
const arg = () => ({ url: `http://127.0.0.1:${port}`, keyFile, model: "tiny" });

test("a completion that answers: serving (0); the key from the file as a bearer header, one token asked for", async () => {
    expect(await probe(arg())).toEqual({ code: 0, out: "serving" });
    const c = seen.find((s) => s.path === "/v1/chat/completions")!;
    expect(c.auth).toBe(`Bearer ${KEY}`);
    expect(JSON.parse(c.body)).toMatchObject({ model: "tiny", max_tokens: 1, temperature: 0 });
});

test("no answer within the timeout, a 5xx, an answer without choices, no server at all: each a miss (1), saying which", async () => {
    mode = "hang";
    const t0 = Date.now();
    expect(await probe(arg())).toEqual({ code: 1, out: "no answer within 1 s" });
    expect(Date.now() - t0).toBeLessThan(10_000);
    mode = "500";
    expect(await probe(arg())).toEqual({ code: 1, out: "HTTP 500" });
    mode = "no-choices";
    expect(await probe(arg())).toEqual({ code: 1, out: "HTTP 200 without choices" });
    const closed = net.createServer();
    await new Promise<void>((r) => closed.listen(0, "127.0.0.1", r));
    const gone = (closed.address() as net.AddressInfo).port;
    await new Promise((r) => closed.close(r));
    expect(await probe({ ...arg(), url: `http://127.0.0.1:${gone}` })).toEqual({ code: 1, out: "no connection (ConnectionRefusedError)" });
});

test("busy for others (tokens generated while its own completion waited) and a 4xx are not judged (3): no restart for them", async () => {
    mode = "busy";
    const busy = await probe(arg());
    expect(busy.code).toBe(3);
    expect(busy.out).toBe("no answer within 1 s, but it generated 50 tokens meanwhile: busy, not hung");
    mode = "401";
    expect(await probe(arg())).toEqual({ code: 3, out: "HTTP 401" });
});

test("no key (missing, empty, a link, a FIFO): not judged, and nothing is sent without it", async () => {
    const cases: [string, () => void][] = [
        ["missing", () => fs.rmSync(keyFile)],
        ["empty", () => fs.writeFileSync(keyFile, "")],
        [
            "a link",
            () => {
                fs.rmSync(keyFile);
                fs.writeFileSync(path.join(dir, "elsewhere"), `${KEY}\n`);
                fs.symlinkSync(path.join(dir, "elsewhere"), keyFile);
            },
        ],
        [
            "a FIFO",
            () => {
                fs.rmSync(keyFile);
                execFile("mkfifo", [keyFile]);
            },
        ],
    ];
    for (const [what, make] of cases) {
        fs.rmSync(keyFile, { force: true });
        fs.writeFileSync(keyFile, `${KEY}\n`);
        make();
        await new Promise((r) => setTimeout(r, 100));
        seen.length = 0;
        const r = await probe(arg());
        expect([what, r]).toEqual([what, { code: 3, out: `no API key in ${keyFile}: not judged` }]);
        expect(seen.filter((s) => s.path === "/v1/chat/completions")).toHaveLength(0);
    }
});

test("anything but the server's own loopback, or a bad timeout, is refused before a request is made", async () => {
    for (const url of ["http://10.0.0.1:8000", "http://127.0.0.1.evil:8000", "file:///etc/passwd", `http://localhost:${port}`]) {
        expect(await probe({ ...arg(), url })).toMatchObject({ code: 64 });
    }
    expect(await probe(arg(), "0")).toMatchObject({ code: 64 });
    expect(await probe(arg(), "nan")).toMatchObject({ code: 64 });
    expect(await probe({ url: arg().url })).toMatchObject({ code: 64 });
    expect(seen).toHaveLength(0);
});

/**
 * infra/scripts/serve_watchdog.sh between the real init (container_init.sh) and a command that stands in for the
 * server, both run by this machine's sh (dash, as in the image), with a stand-in probe whose answer the test sets:
 * the restart through the init and its budget, the bound on restarts of a server that hangs at every start.
 */
describe("serve_watchdog.sh under the container's init", () => {
    const INIT = path.join(__dirname, "..", "..", "infra", "scripts", "container_init.sh");
    const WATCHDOG = path.join(__dirname, "..", "..", "infra", "scripts", "serve_watchdog.sh");
    /**
     * A stand-in for serve_watchdog.py: exits with the first line of the file ARG names (0 serving, 1 a miss, 3 not
     * judged) and takes that line off while more follow (the last one stays), logging each answer.
     */
    const CHECK = Buffer.from(
        [
            "import os, sys",
            "lines = open(sys.argv[1]).read().split()",
            "a = lines[0]",
            "if len(lines) > 1:",
            "    open(sys.argv[1] + '.new', 'w').write('\\n'.join(lines[1:]) + '\\n')",
            "    os.replace(sys.argv[1] + '.new', sys.argv[1])",
            "open(sys.argv[1] + '.log', 'a').write(a + '\\n')",
            "print('check says', a, 'within', sys.argv[2])",
            "sys.exit(int(a))",
        ].join("\n"),
    ).toString("base64");
    let answer: string;
    beforeEach(() => {
        answer = path.join(dir, "answer");
    });
    /** The check's answers from now on, in order (the last one for good). */
    const say = (...a: string[]) => fs.writeFileSync(answer, `${a.join("\n")}\n`);
    const read = (f: string) => fs.readFileSync(path.join(dir, f), "utf8").trim();
    const argv = (command: string, maxRestarts = 3, drop = "") => [
        INIT,
        "name=c",
        "node=n",
        `state-dir=${dir}`,
        `max-starts=${maxRestarts + 1}`,
        "stable-seconds=1",
        "--",
        "sh",
        WATCHDOG,
        ...[
            "name=c",
            "node=n",
            `state-dir=${dir}`,
            `probe=${CHECK}`,
            `probe-arg=${answer}`,
            "every=1",
            "timeout=7",
            "misses=2",
            `max-restarts=${maxRestarts}`,
        ].filter((a) => drop === "" || !a.startsWith(drop)),
        "--",
        "sh",
        "-c",
        command,
    ];
    function start(command: string, maxRestarts = 3) {
        const p = spawn("sh", argv(command, maxRestarts));
        let stderr = "";
        p.stderr?.on("data", (d: Buffer) => (stderr += d.toString()));
        const end = exited(p);
        return { p, end, stderr: () => stderr };
    }

    test("misses in a row kill the server's whole group; the init ends it as a failure (the policy restarts it) and the event is kept", async () => {
        say("1");
        const child = path.join(dir, "child.pid");
        const run = start(`sleep 300 & echo $! > ${child}; wait`);
        expect(await run.end).toBe(137);
        expect(run.stderr()).toContain("watchdog: no completion (check says 1 within 7), 1 of 2");
        expect(run.stderr()).toContain("watchdog: no completion within 7 s, 2 times: restarted");
        expect(read("c.status")).toBe("unknown exited with 137 (start 1 of at most 4)");
        expect(read("c.watchdog")).toMatch(
            /^unknown \d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ no completion within 7 s, 2 times: restarted \(last: check says 1 within 7\)$/,
        );
        expect(read("c.hangs")).toBe("unknown 1");
        const pid = Number(read("child.pid"));
        await until(() => {
            try {
                process.kill(pid, 0);
                return false;
            } catch {
                return true;
            }
        }, "the server's child to be gone");
    }, 30_000);

    test("answers that are not judged (busy, a 4xx) never restart it; an answer between misses starts the count again; a stop is passed on", async () => {
        // not judged, a miss, an answer, a miss, an answer, then not judged: never two misses in a row
        say("3", "1", "0", "1", "0", "3");
        const run = start("while :; do sleep 0.1; done");
        await until(
            () => run.stderr().includes("a completion every 1 s, each within 7 s; 2 missed in a row restart the server"),
            "the watchdog",
        );
        const seen = () => fs.readFileSync(`${answer}.log`, "utf8").trim().split("\n");
        await until(() => seen().length >= 7, "seven checks", 30_000);
        expect(seen().slice(0, 6)).toEqual(["3", "1", "0", "1", "0", "3"]);
        run.p.kill("SIGTERM");
        expect(await run.end).toBe(143);
        expect(run.stderr()).not.toContain("2 of 2");
        expect(fs.existsSync(path.join(dir, "c.watchdog"))).toBe(false);
        // its first answered completion set the watchdog's count back
        expect(read("c.hangs")).toBe("unknown 0");
    }, 30_000);

    test("a server that hangs at every start: after max-restarts restarts without an answered completion the container stays stopped, named", async () => {
        say("1");
        expect(await start("while :; do sleep 0.1; done", 1).end).toBe(137);
        expect(read("c.hangs")).toBe("unknown 1");
        const second = start("while :; do sleep 0.1; done", 1);
        // a clean exit: Docker's on-failure policy does not start it again
        expect(await second.end).toBe(0);
        expect(read("c.status")).toBe(
            "unknown watchdog: no completion within 7 s, 2 times, after 1 restarts by the watchdog without an answered completion (serve.maxRestarts)",
        );
        expect(read("c.watchdog")).toMatch(
            / no completion within 7 s, 2 times: stopped for good after 1 restarts without an answered completion \(last: /,
        );
        expect(second.stderr()).toContain("the container stays stopped");
    }, 30_000);

    test("a watchdog without its probe, interval, timeout, count or bound is refused before anything runs", () => {
        const ran = path.join(dir, "ran");
        for (const drop of ["probe=", "probe-arg=", "every=", "timeout=", "misses=", "max-restarts="]) {
            const r = spawnSync("sh", argv(`touch ${ran}`, 3, drop).slice(8), { encoding: "utf8" });
            expect([drop, r.status]).toEqual([drop, 64]);
            expect(r.stderr).toContain("serve-watchdog: usage:");
        }
        expect(fs.existsSync(ran)).toBe(false);
    });
});

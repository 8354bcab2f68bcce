/**
 * infra/scripts/serve_watchdog.py, the serve watchdog's probe, run by this machine's python3 as the serve container's
 * init runs it, against an HTTP server in this test that plays vLLM's API: answering, hung, failing, refusing the key,
 * and busy for others (its generated-token count grows while the probe's own completion waits).
 */
import { execFile } from "child_process";
import * as fs from "fs";
import * as http from "http";
import * as net from "net";
import * as os from "os";
import * as path from "path";

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

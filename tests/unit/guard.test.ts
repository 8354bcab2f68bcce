/**
 * infra/scripts/vllm_cluster_guard.py, the ASGI middleware the serve entrypoint loads into vLLM: run by python3
 * against a stand-in app that records what reached it (no vLLM needed: the module uses only the standard library).
 */
import { spawnSync } from "child_process";
import * as fs from "fs";
import * as os from "os";
import * as path from "path";

const MODULE_DIR = path.join(__dirname, "..", "..", "infra", "scripts");

/** The key files' directories, removed once the file's tests are done. */
const made: string[] = [];
afterAll(() => {
    for (const d of made) fs.rmSync(d, { recursive: true, force: true });
});

/** A key file as the program installs it (its content, or no file at all for undefined). */
function keyFile(key: string | undefined): string {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), "guard-"));
    made.push(dir);
    const f = path.join(dir, "api-key");
    if (key !== undefined) fs.writeFileSync(f, key, { mode: 0o600 });
    return f;
}

/** Sends each request through RequireKey and returns "status" per request (200 = reached the app). */
function through(
    requests: { path: string; method?: string; auth?: string; type?: string; cors?: boolean; origin?: boolean }[],
    key: string | undefined,
): string[] {
    const py = `
import asyncio, json, os, sys
import vllm_cluster_guard as g
async def app(scope, receive, send):
    await send({"type": "http.response.start", "status": 200, "headers": []})
    await send({"type": "http.response.body", "body": b"ok"})
async def one(r):
    sent = []
    async def send(m): sent.append(m)
    headers = [(b"authorization", r["auth"].encode())] if r.get("auth") is not None else []
    if r.get("cors"): headers.append((b"access-control-request-method", b"POST"))
    if r.get("origin"): headers.append((b"origin", b"https://page.example"))
    scope = {"type": r.get("type", "http"), "method": r.get("method", "POST"), "path": r["path"], "headers": headers}
    await g.RequireKey(app)(scope, None, send)
    return str(sent[0].get("status", sent[0].get("code")))
print(json.dumps([asyncio.run(one(r)) for r in json.loads(sys.argv[1])]))
`;
    // the key reaches the guard only as a file: nothing named VLLM_API_KEY (vLLM would copy it to every Ray worker)
    const env: NodeJS.ProcessEnv = {
        PATH: process.env.PATH,
        PYTHONPATH: MODULE_DIR,
        PYTHONDONTWRITEBYTECODE: "1",
        VLLM_CLUSTER_API_KEY_FILE: keyFile(key),
    };
    const r = spawnSync("python3", ["-c", py, JSON.stringify(requests)], { encoding: "utf8", env });
    if (r.status !== 0) throw new Error(r.stderr);
    return JSON.parse(r.stdout) as string[];
}

test("vLLM's unguarded routes need the key: /invocations, /tokenize, /pause, /scale_elastic_ep", () => {
    const routes = ["/invocations", "/tokenize", "/detokenize", "/pause", "/scale_elastic_ep", "/v1/chat/completions", "/load"];
    expect(
        through(
            routes.map((p) => ({ path: p })),
            "k3y",
        ),
    ).toEqual(routes.map(() => "401"));
    expect(
        through(
            routes.map((p) => ({ path: p, auth: "Bearer k3y" })),
            "k3y",
        ),
    ).toEqual(routes.map(() => "200"));
});

test("a wrong key, another scheme or a bare key is refused", () => {
    expect(
        through(
            [
                { path: "/invocations", auth: "Bearer nope" },
                { path: "/invocations", auth: "Basic k3y" },
                { path: "/invocations", auth: "k3y" },
            ],
            "k3y",
        ),
    ).toEqual(["401", "401", "401"]);
});

test("health, ping, metrics and version stay open; a CORS preflight (Origin and the method asked for) is answered by the guard itself", () => {
    expect(
        through(
            ["/health", "/ping", "/metrics", "/version"].map((p) => ({ path: p, method: "GET" })),
            "k3y",
        ),
    ).toEqual(["200", "200", "200", "200"]);
    // 204 is the guard's own answer (the app behind it answers 200): no route sees a request without the key
    expect(through([{ path: "/invocations", method: "OPTIONS", cors: true, origin: true }], "k3y")).toEqual(["204"]);
    expect(through([{ path: "/invocations", method: "OPTIONS", cors: true, origin: true }], undefined)).toEqual(["204"]);
    // without Origin it is no preflight, whatever else it says: a request like any other, which needs the key
    expect(through([{ path: "/invocations", method: "OPTIONS", cors: true }], "k3y")).toEqual(["401"]);
    expect(through([{ path: "/invocations", method: "OPTIONS", origin: true }], "k3y")).toEqual(["401"]);
    expect(through([{ path: "/invocations", method: "OPTIONS" }], "k3y")).toEqual(["401"]);
    expect(through([{ path: "/invocations", method: "OPTIONS", cors: true, auth: "Bearer k3y" }], "k3y")).toEqual(["200"]);
});

test("the key file as a shell reads it: a trailing newline is not part of the key", () => {
    expect(through([{ path: "/invocations", auth: "Bearer k3y" }], "k3y\n")).toEqual(["200"]);
});

test("an empty key file refuses everything but the open routes (fails closed)", () => {
    expect(through([{ path: "/invocations", auth: "Bearer " }, { path: "/health" }], "")).toEqual(["401", "200"]);
});

test("no key file: everything but the open routes is refused (fails closed)", () => {
    expect(
        through(
            [{ path: "/invocations", auth: "Bearer " }, { path: "/v1/models", auth: "Bearer anything" }, { path: "/health" }],
            undefined,
        ),
    ).toEqual(["401", "401", "200"]);
});

test("a websocket without the key is closed with policy violation", () => {
    expect(through([{ path: "/v1/realtime", type: "websocket" }], "k3y")).toEqual(["1008"]);
});

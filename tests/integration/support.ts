/** Shared by the integration test files: bounded HTTP to the serve endpoint, chat completions, timings. */
import * as fs from "fs";
import * as http from "http";
import * as https from "https";
import * as path from "path";
import { Project, up } from "./engine";
import { stackConfig } from "./hosts";

/**
 * The certificate the simulated stacks serve HTTPS with (serve.tls, made by the testbed): the only one trusted, so
 * a request also checks that the endpoint's address is in it.
 */
function testbedCa(): string {
    const tls = stackConfig(path.join(__dirname, "..", "..", "stacks", "Pulumi.local.yaml")).serve.tls;
    if (!tls) throw new Error("the local stack sets no serve.tls");
    if (!tls.certFile) throw new Error("the local stack gives serve.tls.cert as config, not as the testbed's file");
    return fs.readFileSync(tls.certFile, "utf8");
}

export interface HttpAnswer {
    status: number;
    body: string;
}

/** One bounded HTTP(S) request to the serve endpoint (node's http: the key is never on a command line). */
export function request(method: string, url: string, opts: { key?: string; body?: unknown; timeoutMs?: number } = {}): Promise<HttpAnswer> {
    return new Promise((resolve, reject) => {
        const data = opts.body === undefined ? undefined : JSON.stringify(opts.body);
        const headers: Record<string, string> = {};
        if (opts.key) {
            headers.Authorization = `Bearer ${opts.key}`;
        }
        if (data) {
            headers["Content-Type"] = "application/json";
        }
        const options = { method, headers, timeout: opts.timeoutMs ?? 60_000 };
        const onAnswer = (res: http.IncomingMessage) => {
            let body = "";
            res.on("data", (d: Buffer) => (body += d.toString()));
            res.on("end", () => resolve({ status: res.statusCode ?? 0, body }));
        };
        const req = url.startsWith("https:")
            ? https.request(url, { ...options, ca: testbedCa() }, onAnswer)
            : http.request(url, options, onAnswer);
        req.on("timeout", () => req.destroy(new Error(`${method} ${url}: no answer within ${opts.timeoutMs ?? 60_000} ms`)));
        req.on("error", reject);
        req.end(data);
    });
}

/** A greedy (temperature 0) chat completion of a fixed prompt. */
export function chat(endpoint: string, model: string, key?: string, maxTokens = 16): Promise<HttpAnswer> {
    return request("POST", `${endpoint}/chat/completions`, {
        key,
        body: { model, messages: [{ role: "user", content: "Say hello to the cluster." }], max_tokens: maxTokens, temperature: 0 },
    });
}

/** Tokens the server says it generated for a completion answer. */
export function completionTokens(a: HttpAnswer): number {
    return (JSON.parse(a.body) as { usage?: { completion_tokens?: number } }).usage?.completion_tokens ?? 0;
}

/** Merges this file's timings into the shared timings file (each integration test file adds its own). */
export function mergeTimings(file: string, timings: Record<string, number>): void {
    const previous = fs.existsSync(file) ? (JSON.parse(fs.readFileSync(file, "utf8")) as Record<string, number>) : {};
    fs.writeFileSync(file, JSON.stringify({ ...previous, ...timings }, null, 2));
}

/** Where a serving stack answers, and its key. */
export interface Serving {
    endpoint: string;
    apiKey: string;
}

/**
 * The serving cluster that a test acts on. Each test that needs one starts here instead of trusting the test before
 * it: the endpoint and key come from the stack's outputs when not known yet; a cluster that does not answer a real
 * completion is converged again (`up --refresh`), and when even that fails the test fails with that cause, so one
 * broken step does not turn into failures that say nothing ("Invalid URL") in every test after it.
 */
export async function ensureServing(p: Project, model: string, known: Serving): Promise<Serving> {
    let s = { ...known };
    const problem = async (): Promise<string> => {
        if (!s.endpoint || !s.apiKey) {
            const outs = await p.stack.outputs();
            s = { endpoint: String(outs.endpoint?.value ?? ""), apiKey: String(outs.apiKey?.value ?? "") };
        }
        if (!s.endpoint || !s.apiKey) {
            return "the stack has no endpoint or apiKey output (no up has converged)";
        }
        try {
            const r = await chat(s.endpoint, model, s.apiKey);
            return r.status === 200 ? "" : `a chat completion with the key answered ${r.status}: ${r.body.slice(0, 200)}`;
        } catch (e) {
            return `a chat completion with the key failed: ${(e as Error).message}`;
        }
    };
    const why = await problem();
    if (why === "") {
        return s;
    }
    console.warn(`cluster not serving after the previous test (${why}); converging it with up --refresh`);
    const r = await up(p, { refresh: true });
    if (!r.ok) {
        throw new Error(`cluster not serving after the previous test: ${why}; up --refresh failed too: ${r.error}`);
    }
    s = { endpoint: "", apiKey: "" };
    const still = await problem();
    if (still !== "") {
        throw new Error(`cluster not serving after the previous test: ${why}; after up --refresh: ${still}`);
    }
    return s;
}

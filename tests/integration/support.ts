/** Shared by the integration test files: bounded HTTP to the serve endpoint, chat completions, timings. */
import * as fs from "fs";
import * as http from "http";

export interface HttpAnswer {
    status: number;
    body: string;
}

/** One bounded HTTP request to the serve endpoint (node's http: the key is never on a command line). */
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
        const req = http.request(url, { method, headers, timeout: opts.timeoutMs ?? 60_000 }, (res) => {
            let body = "";
            res.on("data", (d: Buffer) => (body += d.toString()));
            res.on("end", () => resolve({ status: res.statusCode ?? 0, body }));
        });
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

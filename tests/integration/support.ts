/** Shared by the integration test files: bounded HTTP to the serve endpoint, the stand-in model dir, timings. */
import * as fs from "fs";
import * as http from "http";
import * as path from "path";
import { ClusterConfig } from "../../infra/config";

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
        const req = http.request(url, { method, headers, timeout: opts.timeoutMs ?? 30_000 }, (res) => {
            let body = "";
            res.on("data", (d: Buffer) => (body += d.toString()));
            res.on("end", () => resolve({ status: res.statusCode ?? 0, body }));
        });
        req.on("timeout", () => req.destroy(new Error(`${method} ${url}: no answer within ${opts.timeoutMs ?? 30_000} ms`)));
        req.on("error", reject);
        req.end(data);
    });
}

/** Operator prerequisite on the hosts: the model directory (one shared file system on the testbed). */
export function ensureStandInModelDir(cfg: ClusterConfig): void {
    fs.mkdirSync(cfg.model.hostPath, { recursive: true });
    fs.writeFileSync(path.join(cfg.model.hostPath, "config.json"), '{"architectures":["StandIn"]}\n');
}

/** Merges this file's timings into the shared timings file (each integration test file adds its own). */
export function mergeTimings(file: string, timings: Record<string, number>): void {
    const previous = fs.existsSync(file) ? (JSON.parse(fs.readFileSync(file, "utf8")) as Record<string, number>) : {};
    fs.writeFileSync(file, JSON.stringify({ ...previous, ...timings }, null, 2));
}

/**
 * Tensor parallelism must not change what the model says: with temperature 0 and a fixed prompt, the tokens a TP=2
 * cluster across two hosts generates must equal those of TP=1 on one host. The TP=1 reference is one vllm serve
 * container on the head host, started from the same image, model and serve flags as the stack; it is computed
 * once per image and model and shared by the test files of one run.
 */
import * as crypto from "crypto";
import * as fs from "fs";
import * as os from "os";
import * as path from "path";
import { ClusterConfig } from "../../infra/config";
import { Hosts, waitFor } from "./hosts";
import { request } from "./support";

/** The fixed requests both sides answer. */
export const PROMPT = "The capital of France is";
export const CHAT = "Tensor parallelism splits every layer across two hosts.";
const TOKENS = 16;

export interface Answer {
    /** Token IDs of a completion of PROMPT. */
    completion: string[];
    /** The text of a chat completion of CHAT. */
    chat: string;
}

/** The completion and chat answers of the server at `endpoint` (".../v1"), greedy. */
export async function greedyAnswer(endpoint: string, model: string, key: string): Promise<Answer> {
    const c = await request("POST", `${endpoint}/completions`, {
        key,
        timeoutMs: 120_000,
        body: { model, prompt: PROMPT, max_tokens: TOKENS, temperature: 0, logprobs: 0, return_tokens_as_token_ids: true },
    });
    if (c.status !== 200) {
        throw new Error(`completion from ${endpoint}: HTTP ${c.status}: ${c.body.slice(0, 300)}`);
    }
    const m = await request("POST", `${endpoint}/chat/completions`, {
        key,
        timeoutMs: 120_000,
        body: { model, messages: [{ role: "user", content: CHAT }], max_tokens: TOKENS, temperature: 0 },
    });
    if (m.status !== 200) {
        throw new Error(`chat completion from ${endpoint}: HTTP ${m.status}: ${m.body.slice(0, 300)}`);
    }
    const completion = (JSON.parse(c.body) as { choices: { logprobs: { tokens: string[] } }[] }).choices[0].logprobs.tokens;
    const chat = (JSON.parse(m.body) as { choices: { message: { content: string } }[] }).choices[0].message.content;
    return { completion, chat };
}

const REF_CONTAINER = "vcl-it-tp1-reference";
const REF_PORT = 8199;

/** The TP=1 answer of the stack's image and model on its head host, cached for this image and model. */
export async function tp1Reference(hosts: Hosts): Promise<Answer> {
    const cfg: ClusterConfig = hosts.cfg;
    const head = cfg.head.name;
    const imageId = await hosts.imageId(head, cfg.image.ref);
    // the model as the head host sees it (with model.source it is in that host's own directory), links followed
    const modelFiles = await hosts.modelFiles(head);
    const key = crypto
        .createHash("sha256")
        .update(JSON.stringify([imageId, modelFiles, cfg.serve.extraArgs, cfg.serve.maxModelLen]))
        .digest("hex")
        .slice(0, 16);
    const cache = path.join(os.tmpdir(), `vllm-cluster-tp1-reference-${key}.json`);
    if (fs.existsSync(cache)) {
        return JSON.parse(fs.readFileSync(cache, "utf8")) as Answer;
    }
    const env = Object.entries(cfg.head.env).flatMap(([k, v]) => ["-e", `${k}=${v}`]);
    await hosts.docker(head, ["rm", "-f", REF_CONTAINER]);
    await hosts.must(head, [
        "docker", "run", "-d", "--name", REF_CONTAINER, "--network", "host", "--ipc", "host",
        ...env, "-e", `VLLM_HOST_IP=${cfg.head.fabricIp}`,
        "-v", `${cfg.model.hostPath}:${cfg.model.containerPath}:ro`, "--entrypoint", "/usr/bin/env", cfg.image.ref,
        "vllm", "serve", cfg.model.containerPath, "--served-model-name", cfg.model.servedName, "--host", "127.0.0.1",
        "--port", String(REF_PORT), "--max-model-len", String(cfg.serve.maxModelLen ?? 512), ...cfg.serve.extraArgs,
    ]); // prettier-ignore
    try {
        // On the head's loopback only, reached over ssh: no key needed, nothing the cluster uses is touched.
        const local = `http://127.0.0.1:${REF_PORT}`;
        const onHead = (argv: string[]) => hosts.on(head, argv, 200_000);
        await waitFor(
            "the TP=1 reference server's /health",
            async () => (await onHead(["curl", "-s", "-o", "/dev/null", "-w", "%{http_code}", `${local}/health`])).stdout === "200",
            600_000,
            2000,
        );
        const answer = await viaHost(onHead, local, cfg.model.servedName);
        // whole or not at all: two files run at once (run.sh side beside another part) may both compute it
        fs.writeFileSync(`${cache}.${process.pid}`, JSON.stringify(answer));
        fs.renameSync(`${cache}.${process.pid}`, cache);
        return answer;
    } finally {
        await hosts.docker(head, ["rm", "-f", REF_CONTAINER]);
    }
}

/** greedyAnswer against a server that listens on the host's loopback, with curl run on the host. */
async function viaHost(
    onHost: (argv: string[]) => Promise<{ code: number; stdout: string; stderr: string }>,
    base: string,
    model: string,
): Promise<Answer> {
    const post = async (p: string, body: object) => {
        const r = await onHost(["curl", "-sS", "--max-time", "120", "-H", "Content-Type: application/json", "-d", JSON.stringify(body), `${base}${p}`]); // prettier-ignore
        if (r.code !== 0) {
            throw new Error(`${p} on the reference server: ${r.stderr}`);
        }
        return JSON.parse(r.stdout) as Record<string, unknown>;
    };
    const c = (await post("/v1/completions", {
        model,
        prompt: PROMPT,
        max_tokens: TOKENS,
        temperature: 0,
        logprobs: 0,
        return_tokens_as_token_ids: true,
    })) as { choices: { logprobs: { tokens: string[] } }[] };
    const m = (await post("/v1/chat/completions", {
        model,
        messages: [{ role: "user", content: CHAT }],
        max_tokens: TOKENS,
        temperature: 0,
    })) as { choices: { message: { content: string } }[] };
    return { completion: c.choices[0].logprobs.tokens, chat: m.choices[0].message.content };
}

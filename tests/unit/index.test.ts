/**
 * The entrypoint: config read once from the `vllm-cluster` namespace, validated, then the graph. A bad config
 * throws before any resource is registered.
 */
import * as fs from "fs";
import * as os from "os";
import * as path from "path";
import * as pulumi from "@pulumi/pulumi";
import { specialSecretSig, specialSigKey } from "@pulumi/pulumi/runtime/rpc";
import { PROJECT, TEST_TLS, answerLikeHosts, loadStackRaw } from "./harness";

/** The TLS files' directories, removed once the file's tests are done. */
const made: string[] = [];
afterAll(() => {
    for (const d of made) fs.rmSync(d, { recursive: true, force: true });
});

/** The local stack with serve.tls pointing at test files (the testbed's own exist only once it is up). */
function localWithTls(): Record<string, unknown> {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), "vcl-index-tls-"));
    made.push(dir);
    fs.writeFileSync(path.join(dir, "cert.pem"), TEST_TLS.cert);
    fs.writeFileSync(path.join(dir, "key.pem"), TEST_TLS.key, { mode: 0o600 });
    const raw = loadStackRaw("local") as { serve: Record<string, unknown> };
    raw.serve.tls = { certFile: path.join(dir, "cert.pem"), keyFile: path.join(dir, "key.pem") };
    return raw as unknown as Record<string, unknown>;
}

/** The stack config as the engine hands it over; `secret`: the keys set with --secret (Pulumi marks top-level keys). */
function setStackConfig(raw: Record<string, unknown>, secret: string[] = []): void {
    const cfg: Record<string, string> = {};
    for (const [k, v] of Object.entries(raw)) {
        cfg[`${PROJECT}:${k}`] = typeof v === "string" ? v : JSON.stringify(v);
    }
    pulumi.runtime.setAllConfig(
        cfg,
        secret.map((k) => `${PROJECT}:${k}`),
    );
}

/** The local stack with the certificate and key as stack config (what a GitOps runner has), and no file named. */
function localWithTlsConfig(): Record<string, unknown> {
    const raw = loadStackRaw("local") as { serve: Record<string, unknown> };
    raw.serve.tls = { cert: TEST_TLS.cert, key: TEST_TLS.key };
    return raw as unknown as Record<string, unknown>;
}

test("infra/index reads the stack config and exports the outputs", async () => {
    const names: string[] = [];
    await pulumi.runtime.setMocks(
        {
            newResource: (a) => {
                names.push(a.name);
                return answerLikeHosts(a);
            },
            call: (a) => a.inputs,
        },
        PROJECT,
        "local",
        false,
    );
    setStackConfig(localWithTls());
    // eslint-disable-next-line @typescript-eslint/no-require-imports
    const index = require("../../infra/index") as typeof import("../../infra/index");
    const value = <T>(o: pulumi.Output<T>) => new Promise<T>((r) => o.apply(r));
    const [served, dashboard, endpoint, secret] = [
        await value(index.servedModelName),
        await value(index.rayDashboard),
        await value(index.endpoint),
        await pulumi.isSecret(index.apiKey),
    ];
    // Drains the RPC queue, so no registration of this program reaches the next test's mocks.
    await pulumi.runtime.disconnect();
    expect(served).toBe("tiny-qwen2");
    expect(dashboard).toBe("ssh -L 8265:127.0.0.1:8265 root@10.231.0.11");
    expect(endpoint).toBe("https://10.231.0.11:8000/v1");
    expect(secret).toBe(true);
    expect(names).toContain("serve-container");
    // the stack program's one VllmCluster owns the graph
    expect(names).toContain("vllm");
});

test("a bad stack config throws, listing problems, before any resource exists", async () => {
    const names: string[] = [];
    await pulumi.runtime.setMocks(
        { newResource: (a) => (names.push(a.name), { id: "x", state: {} }), call: (a) => a.inputs },
        PROJECT,
        "bad",
        false,
    );
    const raw = loadStackRaw("local") as { nodes: { fabricIp: string }[] };
    raw.nodes[1].fabricIp = raw.nodes[0].fabricIp;
    setStackConfig(raw as unknown as Record<string, unknown>);
    jest.resetModules();
    expect(() => jest.requireActual("../../infra/index")).toThrow("nodes[1].fabricIp: 10.232.0.11 is used by nodes[0]");
    // every registration the program started has reached the mocks once the RPC queue is drained: no fixed sleep
    await pulumi.runtime.disconnect();
    expect(names).toEqual([]);
});

test("a TLS key that others can read fails naming serve.tls.keyFile, before any resource exists", async () => {
    const names: string[] = [];
    await pulumi.runtime.setMocks(
        { newResource: (a) => (names.push(a.name), { id: "x", state: {} }), call: (a) => a.inputs },
        PROJECT,
        "bad-tls",
        false,
    );
    const raw = localWithTls() as { serve: { tls: { keyFile: string } } };
    fs.chmodSync(raw.serve.tls.keyFile, 0o644);
    setStackConfig(raw as unknown as Record<string, unknown>);
    jest.resetModules();
    expect(() => jest.requireActual("../../infra/index")).toThrow(
        `serve.tls.keyFile: ${raw.serve.tls.keyFile} is readable by other users (mode 644); chmod 600 it`,
    );
    await pulumi.runtime.disconnect();
    expect(names).toEqual([]);
});

test("TLS as secret config (serve.tls.cert and serve.tls.key, no file anywhere): the key is installed as a secret", async () => {
    const files: Record<string, unknown> = {};
    await pulumi.runtime.setMocks(
        {
            newResource: (a) => {
                if (a.name.includes("-tls-")) files[a.name] = a.inputs;
                return answerLikeHosts(a);
            },
            call: (a) => a.inputs,
        },
        PROJECT,
        "local-tls-config",
        false,
    );
    setStackConfig(localWithTlsConfig(), ["serve"]);
    jest.resetModules();
    const index = jest.requireActual("../../infra/index") as typeof import("../../infra/index");
    expect(await new Promise((r) => index.endpoint.apply(r))).toBe("https://10.231.0.11:8000/v1");
    await pulumi.runtime.disconnect();
    expect(Object.keys(files).sort()).toEqual(["serve-tls-cert-file", "serve-tls-key-file"]);
    // each text reaches the resource that installs it on the head as a secret input (the mocks see the secret's wrapper)
    for (const [name, text] of [
        ["serve-tls-key-file", TEST_TLS.key],
        ["serve-tls-cert-file", TEST_TLS.cert],
    ]) {
        const content = (files[name] as { key: Record<string, unknown> }).key;
        expect([name, content[specialSigKey], content.value]).toEqual([name, specialSecretSig, text]);
    }
});

test("serve.tls.key in plain config fails naming it and how to set it, before any resource exists; a missing file names the secret-config alternative", async () => {
    for (const [raw, secret, why] of [
        [localWithTlsConfig(), [], "serve.tls.key: set it as a secret (pulumi config set --secret --path serve.tls.key < key.pem)"],
        [
            (() => {
                const r = localWithTls() as { serve: { tls: { keyFile: string } } };
                r.serve.tls.keyFile = "/nonexistent/api-key.pem";
                return r as unknown as Record<string, unknown>;
            })(),
            [],
            "serve.tls.keyFile: cannot read /nonexistent/api-key.pem (ENOENT); on a machine without this file (a GitOps runner), give the key as secret config instead: pulumi config set --secret --path serve.tls.key < api-key.pem, then pulumi config rm --path serve.tls.keyFile",
        ],
    ] as [Record<string, unknown>, string[], string][]) {
        const names: string[] = [];
        await pulumi.runtime.setMocks(
            { newResource: (a) => (names.push(a.name), { id: "x", state: {} }), call: (a) => a.inputs },
            PROJECT,
            "bad-tls-config",
            false,
        );
        setStackConfig(raw, secret);
        jest.resetModules();
        expect(() => jest.requireActual("../../infra/index")).toThrow(why);
        await pulumi.runtime.disconnect();
        expect(names).toEqual([]);
    }
});

test("clusterName names the stack's cluster: its containers, state directory and resources; a bad one fails naming the key", async () => {
    const made: Record<string, unknown> = {};
    await pulumi.runtime.setMocks(
        {
            newResource: (a) => {
                made[a.name] = a.inputs;
                return answerLikeHosts(a);
            },
            call: (a) => a.inputs,
        },
        PROJECT,
        "second-model",
        false,
    );
    setStackConfig({ ...localWithTlsConfig(), clusterName: "llama", serve: { ...(localWithTlsConfig().serve as object), port: 8100 } }, [
        "serve",
    ]);
    jest.resetModules();
    const index = jest.requireActual("../../infra/index") as typeof import("../../infra/index");
    expect(await new Promise((r) => index.endpoint.apply(r))).toBe("https://10.231.0.11:8100/v1");
    await pulumi.runtime.disconnect();
    expect(Object.keys(made)).toEqual(
        expect.arrayContaining(["llama", "llama-serve-container", "llama-ray-head-container", "llama-api-key"]),
    );
    expect(Object.keys(made).filter((n) => n === "serve-container" || n === "vllm")).toEqual([]);
    expect((made["llama-serve-container"] as { name: string }).name).toBe("llama-serve");
    expect((made["llama-ray-worker-spark-2-container"] as { name: string }).name).toBe("llama-ray-worker");

    const names: string[] = [];
    await pulumi.runtime.setMocks(
        { newResource: (a) => (names.push(a.name), { id: "x", state: {} }), call: (a) => a.inputs },
        PROJECT,
        "bad-name",
        false,
    );
    setStackConfig({ ...loadStackRaw("local"), clusterName: "Llama_2" });
    jest.resetModules();
    expect(() => jest.requireActual("../../infra/index")).toThrow('clusterName: "Llama_2" must be lower-case letters');
    await pulumi.runtime.disconnect();
    expect(names).toEqual([]);
}, 60_000);

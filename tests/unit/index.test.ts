/**
 * The entrypoint: config read once from the `vllm-cluster` namespace, validated, then the graph. A bad config
 * throws before any resource is registered.
 */
import * as fs from "fs";
import * as os from "os";
import * as path from "path";
import * as pulumi from "@pulumi/pulumi";
import { PROJECT, TEST_TLS, loadStackRaw } from "./harness";

/** The local stack with serve.tls pointing at test files (the testbed's own exist only once it is up). */
function localWithTls(): Record<string, unknown> {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), "vcl-index-tls-"));
    fs.writeFileSync(path.join(dir, "cert.pem"), TEST_TLS.cert);
    fs.writeFileSync(path.join(dir, "key.pem"), TEST_TLS.key, { mode: 0o600 });
    const raw = loadStackRaw("local") as { serve: Record<string, unknown> };
    raw.serve.tls = { certFile: path.join(dir, "cert.pem"), keyFile: path.join(dir, "key.pem") };
    return raw as unknown as Record<string, unknown>;
}

function setStackConfig(raw: Record<string, unknown>): void {
    const cfg: Record<string, string> = {};
    for (const [k, v] of Object.entries(raw)) {
        cfg[`${PROJECT}:${k}`] = typeof v === "string" ? v : JSON.stringify(v);
    }
    pulumi.runtime.setAllConfig(cfg);
}

test("infra/index reads the stack config and exports the outputs", async () => {
    const names: string[] = [];
    await pulumi.runtime.setMocks(
        {
            newResource: (a) => {
                names.push(a.name);
                const state: Record<string, unknown> = { ...a.inputs };
                if (a.name.endsWith("-preflight")) state.stdout = '{"arch":"x86_64"}';
                if (a.name.endsWith("-probe")) state.result = '{"fingerprint":"f00"}';
                if (a.name.endsWith("-readiness")) state.result = '{"ready":true}';
                if (a.type.startsWith("pulumi-nodejs:dynamic")) state.imageId = "sha256:1";
                if (a.type.startsWith("random:")) state.result = "k";
                return { id: `${a.name}-id`, state };
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
    expect(index.servedModelName).toBe("tiny-qwen2");
    expect(index.rayDashboard).toBe("ssh -L 8265:127.0.0.1:8265 root@10.231.0.11");
    const endpoint = await new Promise((r) => index.endpoint.apply(r));
    expect(endpoint).toBe("https://10.231.0.11:8000/v1");
    expect(await pulumi.isSecret(index.apiKey)).toBe(true);
    expect(names).toContain("serve-container");
    // Drains the RPC queue, so no registration of this program reaches the next test's mocks.
    await pulumi.runtime.disconnect();
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

/** serve.tls: the operator's certificate and key, read and checked before any resource exists. */
import * as fs from "fs";
import * as os from "os";
import * as path from "path";
import * as pulumi from "@pulumi/pulumi";
import { loadTls, operatorPath } from "../../infra/tls";
import { validateConfig } from "../../infra/config";
import { TEST_TLS, loadStackRaw } from "./harness";

let dir: string;
const cert = () => path.join(dir, "cert.pem");
const key = () => path.join(dir, "key.pem");
const tls = () => ({ tls: { certFile: cert(), keyFile: key() } });

beforeEach(() => {
    dir = fs.mkdtempSync(path.join(os.tmpdir(), "vcl-tls-"));
    fs.writeFileSync(cert(), TEST_TLS.cert);
    fs.writeFileSync(key(), TEST_TLS.key, { mode: 0o600 });
});
afterEach(() => fs.rmSync(dir, { recursive: true, force: true }));

test("no serve.tls: nothing is read", () => {
    expect(loadTls({ tls: undefined })).toBeUndefined();
});

test("reads both files; the key only as a secret", async () => {
    const got = loadTls(tls())!;
    expect(got.cert).toBe(TEST_TLS.cert);
    expect(await pulumi.isSecret(got.key)).toBe(true);
});

test("each bad file fails naming its key and path, never its content", () => {
    fs.chmodSync(key(), 0o640);
    expect(() => loadTls(tls())).toThrow(`serve.tls.keyFile: ${key()} is readable by other users (mode 640); chmod 600 it`);
    fs.chmodSync(key(), 0o600);
    fs.writeFileSync(cert(), "not a certificate\n");
    expect(() => loadTls(tls())).toThrow(`serve.tls.certFile: ${cert()} holds no PEM certificate`);
    fs.writeFileSync(cert(), TEST_TLS.cert + TEST_TLS.key);
    expect(() => loadTls(tls())).toThrow("also holds a private key; keep the key in serve.tls.keyFile only");
    fs.writeFileSync(cert(), TEST_TLS.cert);
    fs.writeFileSync(key(), "secret but not PEM\n");
    let message = "";
    try {
        loadTls(tls());
    } catch (e) {
        message = (e as Error).message;
    }
    expect(message).toBe(`serve.tls.keyFile: ${key()} holds no PEM private key`);
    fs.rmSync(key());
    expect(() => loadTls(tls())).toThrow(`serve.tls.keyFile: cannot read ${key()} (ENOENT)`);
    fs.mkdirSync(key());
    expect(() => loadTls(tls())).toThrow(`serve.tls.keyFile: ${key()} is not a non-empty regular file`);
});

test("~/ is the operator's home", () => {
    expect(operatorPath("~/.config/vllm-cluster/tls/api-key.pem")).toBe(path.join(os.homedir(), ".config/vllm-cluster/tls/api-key.pem"));
    expect(operatorPath("/etc/x.pem")).toBe("/etc/x.pem");
});

test("config: serve.tls needs both files; a TLS flag in extraArgs is managed", () => {
    const raw = loadStackRaw("local") as { serve: Record<string, unknown> };
    raw.serve.tls = { certFile: "/c.pem" };
    expect(() => validateConfig(raw as Record<string, unknown>)).toThrow("serve.tls.keyFile");
    raw.serve.tls = { certFile: "/c.pem", keyFile: "/k.pem" };
    raw.serve.extraArgs = ["--ssl_keyf", "/other.pem"];
    expect(() => validateConfig(raw as Record<string, unknown>)).toThrow("--ssl-keyf would set --ssl-keyfile");
});

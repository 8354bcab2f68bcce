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
    expect(() => loadTls(tls())).toThrow("also holds a private key; keep the key in serve.tls.key or serve.tls.keyFile only");
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

describe("the certificate and key as stack config (a GitOps runner has neither file)", () => {
    const cfgTls = (tls: Record<string, string>) => {
        const raw = loadStackRaw("local") as { serve: Record<string, unknown> };
        raw.serve.tls = tls;
        return validateConfig(raw as Record<string, unknown>).serve;
    };

    test("taken from config, no file read; the key only when set as a secret, and then kept one", async () => {
        const got = loadTls(cfgTls({ cert: TEST_TLS.cert, key: TEST_TLS.key }), true)!;
        expect(got.cert).toBe(TEST_TLS.cert);
        expect(await pulumi.isSecret(got.key)).toBe(true);
        expect(() => loadTls(cfgTls({ cert: TEST_TLS.cert, key: TEST_TLS.key }), false)).toThrow(
            "serve.tls.key: set it as a secret (pulumi config set --secret --path serve.tls.key < key.pem); a plain value sits in the stack file in clear",
        );
        // one from config, the other from a file
        expect(loadTls(cfgTls({ certFile: cert(), key: TEST_TLS.key }), true)!.cert).toBe(TEST_TLS.cert);
    });

    test("each given once: as a file or as config, never both, never neither", () => {
        expect(() => cfgTls({ cert: TEST_TLS.cert, certFile: cert(), keyFile: key() })).toThrow(
            "serve.tls.cert: give the certificate once: serve.tls.cert or serve.tls.certFile, not both",
        );
        expect(() => cfgTls({ cert: TEST_TLS.cert })).toThrow(
            "serve.tls.keyFile: is required: the private key as a file (serve.tls.keyFile) or as secret config (serve.tls.key)",
        );
    });

    test("a text that is not what its key says is named, never shown", () => {
        const shown: string[] = [];
        const attempt = (tls: Record<string, string>) => {
            try {
                loadTls(cfgTls(tls), true);
            } catch (e) {
                shown.push((e as Error).message);
            }
        };
        attempt({ cert: "not a certificate, but a secret\n", key: TEST_TLS.key });
        attempt({ cert: TEST_TLS.cert + TEST_TLS.key, key: TEST_TLS.key });
        attempt({ cert: TEST_TLS.cert, key: "secret but not PEM\n" });
        expect(shown).toEqual([
            "serve.tls.cert: its text holds no PEM certificate (-----BEGIN CERTIFICATE-----)",
            "serve.tls.cert: its text also holds a private key; keep the key in serve.tls.key or serve.tls.keyFile only",
            "serve.tls.key: its text holds no PEM private key",
        ]);
    });

    test("a file that is not there (a runner without the operator's files) is named with its key, its path and the config that replaces it", () => {
        fs.rmSync(key());
        fs.rmSync(cert());
        expect(() => loadTls(tls())).toThrow(
            `serve.tls.certFile: cannot read ${cert()} (ENOENT); on a machine without this file (a GitOps runner), give the certificate as ` +
                "config instead: pulumi config set --path serve.tls.cert < cert.pem, then pulumi config rm --path serve.tls.certFile",
        );
        fs.writeFileSync(cert(), TEST_TLS.cert);
        expect(() => loadTls(tls())).toThrow(
            `serve.tls.keyFile: cannot read ${key()} (ENOENT); on a machine without this file (a GitOps runner), give the key as secret ` +
                "config instead: pulumi config set --secret --path serve.tls.key < key.pem, then pulumi config rm --path serve.tls.keyFile",
        );
    });
});

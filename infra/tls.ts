/**
 * The API's TLS certificate and key (serve.tls), before any resource exists: each from stack config (the key a
 * secret: what a GitOps runner, which has no such files, deploys with) or read from a file on the operator's machine
 * (a convenience for the operator's own runs). A missing file, a key that others can read, a key in plain config, or a
 * text that is not what its key says fails with the offending key named and nothing touched. The private key never
 * leaves a secret Output, and no error shows a text.
 */
import * as fs from "fs";
import * as os from "os";
import * as path from "path";
import * as pulumi from "@pulumi/pulumi";
import type { ServeConfig } from "./config";

/** What the program installs on the head for HTTPS: the certificate (chain) and its private key (secret). */
export interface TlsMaterial {
    cert: string;
    key: pulumi.Output<string>;
}

/** Resolved TLS settings: no TLS, or the material to install. */
export type ServeTls = TlsMaterial | undefined;

const CERT_RE = /^-----BEGIN CERTIFICATE-----$/m;
const KEY_RE = /^-----BEGIN (?:[A-Z]+ )?PRIVATE KEY-----$/m;

/** `~/x` is the operator's home, as ssh reads it. */
export function operatorPath(p: string): string {
    return p === "~" || p.startsWith("~/") ? path.join(os.homedir(), p.slice(1)) : p;
}

/** How to give one of them as stack config instead of a file, for a machine that lacks the file. */
function asConfigInstead(fileKey: "certFile" | "keyFile", p: string): string {
    const [text, secret, what] = fileKey === "keyFile" ? ["key", " --secret", "the key"] : ["cert", "", "the certificate"];
    return (
        `; on a machine without this file (a GitOps runner), give ${what} as${secret ? " secret" : ""} config instead: ` +
        `pulumi config set${secret} --path serve.tls.${text} < ${path.basename(p)}, then pulumi config rm --path serve.tls.${fileKey}`
    );
}

/** Reads one operator file, failing with the config key named (never the content). */
function readOperatorFile(fileKey: "certFile" | "keyFile", p: string): { text: string; mode: number } {
    const key = `serve.tls.${fileKey}`;
    const file = operatorPath(p);
    let st: fs.Stats;
    try {
        st = fs.statSync(file);
    } catch (e) {
        throw new Error(`${key}: cannot read ${p} (${(e as NodeJS.ErrnoException).code ?? String(e)})${asConfigInstead(fileKey, p)}`);
    }
    if (!st.isFile() || st.size === 0) {
        throw new Error(`${key}: ${p} is not a non-empty regular file`);
    }
    try {
        return { text: fs.readFileSync(file, "utf8"), mode: st.mode & 0o777 };
    } catch (e) {
        throw new Error(`${key}: cannot read ${p} (${(e as NodeJS.ErrnoException).code ?? String(e)})${asConfigInstead(fileKey, p)}`);
    }
}

/** The certificate: serve.tls.cert, or the file serve.tls.certFile names. */
function certificate(tls: NonNullable<ServeConfig["tls"]>): string {
    const [key, where, text] =
        tls.cert !== undefined
            ? ["serve.tls.cert", "its text", tls.cert]
            : ["serve.tls.certFile", tls.certFile!, readOperatorFile("certFile", tls.certFile!).text];
    if (!CERT_RE.test(text)) {
        throw new Error(`${key}: ${where} holds no PEM certificate (-----BEGIN CERTIFICATE-----)`);
    }
    if (KEY_RE.test(text)) {
        throw new Error(`${key}: ${where} also holds a private key; keep the key in serve.tls.key or serve.tls.keyFile only`);
    }
    return text;
}

/** The private key: serve.tls.key (only as a secret), or the file serve.tls.keyFile names (mode 600). */
function privateKey(tls: NonNullable<ServeConfig["tls"]>, serveIsSecret: boolean): string {
    if (tls.key !== undefined) {
        if (!serveIsSecret) {
            throw new Error(
                "serve.tls.key: set it as a secret (pulumi config set --secret --path serve.tls.key < key.pem); a plain value sits in the stack file in clear",
            );
        }
        if (!KEY_RE.test(tls.key)) {
            throw new Error("serve.tls.key: its text holds no PEM private key");
        }
        return tls.key;
    }
    const p = tls.keyFile!;
    const key = readOperatorFile("keyFile", p);
    if ((key.mode & 0o077) !== 0) {
        throw new Error(`serve.tls.keyFile: ${p} is readable by other users (mode ${key.mode.toString(8).padStart(3, "0")}); chmod 600 it`);
    }
    if (!KEY_RE.test(key.text)) {
        throw new Error(`serve.tls.keyFile: ${p} holds no PEM private key`);
    }
    return key.text;
}

/** The PEM private key given as an Input (VllmCluster's tlsKey), checked when it resolves; never shown. */
function givenKey(key: pulumi.Input<string>): pulumi.Output<string> {
    return pulumi.secret(
        pulumi.output(key).apply((k) => {
            if (!KEY_RE.test(k)) throw new Error("tlsKey: its text holds no PEM private key");
            return k;
        }),
    );
}

/**
 * The TLS material serve.tls gives, or undefined without serve.tls. `serveIsSecret`: the serve key holds a value
 * set with --secret (Pulumi marks the whole key, loadSecretConfig().serveArgs); without it serve.tls.key is refused.
 * `key`: the private key given apart from serve (VllmCluster's tlsKey), which then stands for serve.tls.key.
 * Throws naming serve.tls.cert/certFile or serve.tls.key/keyFile when a text or file is missing, unreadable, not PEM
 * of its kind, or (the key) readable by group or others or set in clear.
 */
export function loadTls(serve: Pick<ServeConfig, "tls">, serveIsSecret = false, key?: pulumi.Input<string>): ServeTls {
    if (serve.tls === undefined) {
        if (key !== undefined) throw new Error("tlsKey: given, but serve.tls is not set (the certificate goes there)");
        return undefined;
    }
    const cert = certificate(serve.tls);
    if (key !== undefined) {
        if (serve.tls.keyFile !== undefined) throw new Error("tlsKey: give the private key once: tlsKey or serve.tls.keyFile, not both");
        return { cert, key: givenKey(key) };
    }
    return { cert, key: pulumi.secret(privateKey(serve.tls, serveIsSecret)) };
}

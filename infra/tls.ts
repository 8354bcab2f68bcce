/**
 * The API's TLS certificate and key (serve.tls), read from the operator's machine when the program runs, before any
 * resource exists: a missing file, a key that others can read, or a file that is not what its key says fails with
 * the offending key named and nothing touched. The private key never leaves a secret Output.
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

/** Reads one operator file, failing with the config key named (never the content). */
function readOperatorFile(key: string, p: string): { text: string; mode: number } {
    const file = operatorPath(p);
    let st: fs.Stats;
    try {
        st = fs.statSync(file);
    } catch (e) {
        throw new Error(`${key}: cannot read ${p} (${(e as NodeJS.ErrnoException).code ?? String(e)})`);
    }
    if (!st.isFile() || st.size === 0) {
        throw new Error(`${key}: ${p} is not a non-empty regular file`);
    }
    try {
        return { text: fs.readFileSync(file, "utf8"), mode: st.mode & 0o777 };
    } catch (e) {
        throw new Error(`${key}: cannot read ${p} (${(e as NodeJS.ErrnoException).code ?? String(e)})`);
    }
}

/**
 * The TLS material serve.tls names, or undefined without serve.tls. Throws naming `serve.tls.certFile` or
 * `serve.tls.keyFile` when a file is missing, unreadable, not PEM of its kind, or (the key) readable by group or others.
 */
export function loadTls(serve: Pick<ServeConfig, "tls">): ServeTls {
    if (serve.tls === undefined) {
        return undefined;
    }
    const cert = readOperatorFile("serve.tls.certFile", serve.tls.certFile);
    if (!CERT_RE.test(cert.text)) {
        throw new Error(`serve.tls.certFile: ${serve.tls.certFile} holds no PEM certificate (-----BEGIN CERTIFICATE-----)`);
    }
    if (KEY_RE.test(cert.text)) {
        throw new Error(`serve.tls.certFile: ${serve.tls.certFile} also holds a private key; keep the key in serve.tls.keyFile only`);
    }
    const key = readOperatorFile("serve.tls.keyFile", serve.tls.keyFile);
    if ((key.mode & 0o077) !== 0) {
        throw new Error(
            `serve.tls.keyFile: ${serve.tls.keyFile} is readable by other users (mode ${key.mode.toString(8).padStart(3, "0")}); ` +
                `chmod 600 it`,
        );
    }
    if (!KEY_RE.test(key.text)) {
        throw new Error(`serve.tls.keyFile: ${serve.tls.keyFile} holds no PEM private key`);
    }
    return { cert: cert.text, key: pulumi.secret(key.text) };
}

/**
 * Secret files on a host (the API key and TLS files on the head, the Ray token on every Ray host): installed from stdin (never
 * argv), checked by their hash, removed on destroy.
 */
import { createHash } from "crypto";
import { apiKeyHostPath, nodeStateDir, rayTokenHostPath, tlsCertHostPath, tlsKeyHostPath } from "./node";
import { shellQuote } from "./quote";
import { SshTarget, remoteScriptCommand } from "./ssh";

/** Which secret file: what it is called in messages, and where it lives on the node. */
export interface SecretFile {
    /** "api key", "ray token" */
    kind: string;
    node: string;
    dir: string;
    file: string;
}

export function apiKeyFile(stateDir: string, node: string): SecretFile {
    return { kind: "api key", node, dir: nodeStateDir(stateDir, node), file: apiKeyHostPath(stateDir, node) };
}

/** The API's TLS private key and certificate on the head (serve.tls). */
export function tlsKeyFile(stateDir: string, node: string): SecretFile {
    return { kind: "tls key", node, dir: nodeStateDir(stateDir, node), file: tlsKeyHostPath(stateDir, node) };
}
export function tlsCertFile(stateDir: string, node: string): SecretFile {
    return { kind: "tls certificate", node, dir: nodeStateDir(stateDir, node), file: tlsCertHostPath(stateDir, node) };
}

export function rayTokenFile(stateDir: string, node: string): SecretFile {
    return { kind: "ray token", node, dir: nodeStateDir(stateDir, node), file: rayTokenHostPath(stateDir, node) };
}

/**
 * Installs the secret on the host: it arrives on stdin (never argv), files are created under umask 077 and moved
 * into place atomically. Prints the file path.
 */
export function secretInstallScript(s: SecretFile): string {
    const file = shellQuote(s.file);
    return [
        "set -eu",
        "umask 077",
        `mkdir -p ${shellQuote(s.dir)}`,
        `tmp=${shellQuote(`${s.dir}/.${s.kind.replace(/ /g, "-")}.`)}$$`,
        // A bind mount of a missing file makes an empty directory in its place; mv would then move the secret
        // into it. Remove such a directory; refuse anything else that is not a regular file.
        `if [ -d ${file} ]; then rmdir ${file} 2>/dev/null || { echo ${shellQuote(
            `${s.kind} install on node ${s.node}: ${s.file} is a non-empty directory; remove it`,
        )} >&2; exit 1; }; fi`,
        `cat > "$tmp"`,
        `if [ ! -s "$tmp" ]; then rm -f "$tmp"; echo ${shellQuote(`${s.kind} install on node ${s.node}: empty ${s.kind} on stdin`)} >&2; exit 1; fi`,
        `chmod 600 "$tmp"`,
        `mv -f "$tmp" ${file}`,
        `echo ${file}`,
    ].join("\n");
}

/**
 * A short one-way hash of a secret, carried by containers as a label so that a new secret replaces the containers
 * that read it (at start). A 48-character random secret cannot be recovered from it.
 */
export function secretHash(kind: string, secret: string): string {
    return createHash("sha256").update(`vllm-cluster ${kind}\n${secret}`).digest("hex").slice(0, 16);
}

export function apiKeyHash(key: string): string {
    return secretHash("api key", key);
}

/**
 * Prints the hash (as secretHash computes it) of the file's content, or "missing" when it is not a readable,
 * non-empty regular file. Read-only: what `pulumi refresh` runs.
 */
export function secretCheckScript(s: SecretFile): string {
    const file = shellQuote(s.file);
    return [
        "set -eu",
        `if [ ! -f ${file} ] || [ ! -s ${file} ] || [ ! -r ${file} ]; then echo missing; exit 0; fi`,
        `{ printf '%s\\n' ${shellQuote(`vllm-cluster ${s.kind}`)}; cat ${file}; } | sha256sum | cut -c1-16`,
    ].join("\n");
}

export function secretRemoveScript(s: SecretFile): string {
    return `rm -f ${shellQuote(s.file)}`;
}

/** The three local commands (they reach the node over ssh) a KeyFile resource runs for this file. */
export function secretFileCommands(t: SshTarget, s: SecretFile): { installScript: string; checkScript: string; removeScript: string } {
    return {
        installScript: remoteScriptCommand(t, `${s.kind} install on node ${s.node}`, secretInstallScript(s)),
        checkScript: remoteScriptCommand(t, `${s.kind} check on node ${s.node}`, secretCheckScript(s)),
        removeScript: remoteScriptCommand(t, `${s.kind} removal on node ${s.node}`, secretRemoveScript(s)),
    };
}

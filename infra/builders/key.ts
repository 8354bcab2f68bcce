/**
 * Secret files on a host (the API key and TLS files on the head, the Ray token on every Ray host): installed from stdin (never
 * argv), checked by their hash, removed on destroy.
 */
import { createHash } from "crypto";
import { apiKeyHostPath, nodeStateDir, rayTokenHostPath, tlsCertHostPath, tlsKeyHostPath } from "./node";
import { RemoteStep, remoteStepCommand } from "./remoteStep";
import type { SshTarget } from "./ssh";

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

/** The step (infra/scripts/secret_file.sh) that installs the secret, which arrives on its stdin (never argv). */
export function secretInstallStep(s: SecretFile): RemoteStep {
    return {
        what: `${s.kind} install on node ${s.node}`,
        script: "secret_file.sh",
        args: ["install", `kind=${s.kind}`, `node=${s.node}`, `dir=${s.dir}`, `file=${s.file}`],
    };
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
 * The read-only step that prints the hash (as secretHash computes it) of the file's content, or "missing" when it
 * is not a readable, non-empty regular file: what `pulumi refresh` runs.
 */
export function secretCheckStep(s: SecretFile): RemoteStep {
    return { what: `${s.kind} check on node ${s.node}`, script: "secret_file.sh", args: ["check", `kind=${s.kind}`, `file=${s.file}`] };
}

export function secretRemoveStep(s: SecretFile): RemoteStep {
    return { what: `${s.kind} removal on node ${s.node}`, script: "secret_file.sh", args: ["remove", `file=${s.file}`] };
}

/** The three local commands (they reach the node over ssh) a KeyFile resource runs for this file. */
export function secretFileCommands(t: SshTarget, s: SecretFile): { installScript: string; checkScript: string; removeScript: string } {
    return {
        installScript: remoteStepCommand(t, secretInstallStep(s)),
        checkScript: remoteStepCommand(t, secretCheckStep(s)),
        removeScript: remoteStepCommand(t, secretRemoveStep(s)),
    };
}

/** The API key file on the head: installed from stdin (never argv), removed on destroy, known by its hash. */
import { createHash } from "crypto";
import { apiKeyHostPath, nodeStateDir } from "./node";
import { shellQuote } from "./quote";
import { SshTarget, remoteScriptCommand } from "./ssh";

/**
 * Installs the API key on the host: the key arrives on stdin (never argv), files are created under umask 077
 * and moved into place atomically. Prints the key file path.
 */
export function apiKeyInstallScript(stateDir: string, node: string): string {
    const dir = nodeStateDir(stateDir, node);
    const file = apiKeyHostPath(stateDir, node);
    return [
        "set -eu",
        "umask 077",
        `mkdir -p ${shellQuote(dir)}`,
        `tmp=${shellQuote(`${dir}/.api-key.`)}$$`,
        // A bind mount of a missing key file makes an empty directory in its place; mv would then move the key
        // into it. Remove such a directory; refuse anything else that is not a regular file.
        `if [ -d ${shellQuote(file)} ]; then rmdir ${shellQuote(file)} 2>/dev/null || { echo ${shellQuote(
            `api key install on node ${node}: ${file} is a non-empty directory; remove it`,
        )} >&2; exit 1; }; fi`,
        `cat > "$tmp"`,
        `if [ ! -s "$tmp" ]; then rm -f "$tmp"; echo ${shellQuote(`api key install on node ${node}: empty key on stdin`)} >&2; exit 1; fi`,
        `chmod 600 "$tmp"`,
        `mv -f "$tmp" ${shellQuote(file)}`,
        `echo ${shellQuote(file)}`,
    ].join("\n");
}

/**
 * A short one-way hash of the API key, carried by the serve container as a label so that a new key replaces the
 * server (which reads the key only at start). A 48-character random key cannot be recovered from it.
 */
export function apiKeyHash(key: string): string {
    return createHash("sha256").update(`vllm-cluster api key\n${key}`).digest("hex").slice(0, 16);
}

/**
 * Prints the hash (as apiKeyHash computes it) of the key file's content, or "missing" when it is not a readable,
 * non-empty regular file. Read-only: what `pulumi refresh` runs.
 */
export function apiKeyCheckScript(stateDir: string, node: string): string {
    const file = shellQuote(apiKeyHostPath(stateDir, node));
    return [
        "set -eu",
        `if [ ! -f ${file} ] || [ ! -s ${file} ] || [ ! -r ${file} ]; then echo missing; exit 0; fi`,
        `{ printf 'vllm-cluster api key\n'; cat ${file}; } | sha256sum | cut -c1-16`,
    ].join("\n");
}

export function apiKeyCheckCommand(t: SshTarget, stateDir: string, node: string): string {
    return remoteScriptCommand(t, `api key check on node ${node}`, apiKeyCheckScript(stateDir, node));
}

export function apiKeyRemoveScript(stateDir: string, node: string): string {
    return `rm -f ${shellQuote(apiKeyHostPath(stateDir, node))}`;
}

/** Local command installing the key on the node; the key is its stdin. */
export function apiKeyInstallCommand(t: SshTarget, stateDir: string, node: string): string {
    return remoteScriptCommand(t, `api key install on node ${node}`, apiKeyInstallScript(stateDir, node));
}

export function apiKeyRemoveCommand(t: SshTarget, stateDir: string, node: string): string {
    return remoteScriptCommand(t, `api key removal on node ${node}`, apiKeyRemoveScript(stateDir, node));
}

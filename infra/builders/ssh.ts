/**
 * How the program reaches a host: the system ssh with host keys always verified, the same options for the docker
 * provider's ssh:// transport, and remote scripts run under an explicit shell whatever the login shell is.
 */
import type { NodeConfig, SshConfig } from "../config";
import { shellJoin, shellQuote } from "./quote";

/** How to reach one host over SSH; the same options serve the system ssh and the docker ssh:// transport. */
export interface SshTarget {
    user: string;
    host: string;
    port: number;
    privateKeyPath: string;
    knownHostsFile: string;
}

/**
 * ssh options shared by every remote command and by the docker provider's `sshOpts`. Host keys are always
 * verified against the configured known_hosts file; BatchMode makes a missing key fail instead of prompting.
 */
export function sshOptions(t: Pick<SshTarget, "privateKeyPath" | "knownHostsFile" | "port">): string[] {
    return [
        "-i",
        t.privateKeyPath,
        "-o",
        "IdentitiesOnly=yes",
        "-o",
        `UserKnownHostsFile=${t.knownHostsFile}`,
        "-o",
        "StrictHostKeyChecking=yes",
        "-o",
        "BatchMode=yes",
        "-o",
        "ConnectTimeout=10",
        "-p",
        String(t.port),
    ];
}

/** The docker provider host URL for a node: `ssh://<user>@<host>:<port>`. */
export function dockerHostUrl(t: Pick<SshTarget, "user" | "host" | "port">): string {
    return `ssh://${t.user}@${t.host}:${t.port}`;
}

export function sshTargetOf(n: Pick<NodeConfig, "sshUser" | "sshHost" | "sshPort">, ssh: SshConfig): SshTarget {
    return {
        user: n.sshUser,
        host: n.sshHost,
        port: n.sshPort,
        privateKeyPath: ssh.privateKeyPath,
        knownHostsFile: ssh.knownHostsFile,
    };
}

/** ssh argv that runs `remoteArgv` on the target; the remote login shell sees one safely quoted string. */
export function sshArgv(t: SshTarget, remoteArgv: readonly string[]): string[] {
    return ["ssh", ...sshOptions(t), "--", `${t.user}@${t.host}`, shellJoin(remoteArgv)];
}

/** A local shell command line running `remoteArgv` on the target. */
export function sshCommand(t: SshTarget, remoteArgv: readonly string[]): string {
    return shellJoin(sshArgv(t, remoteArgv));
}

/**
 * A local shell command line that runs `script` on the target under `sh -c` (or `bash -c`), independent of the
 * remote user's login shell. When ssh itself fails (exit 255) the message names the step and the host.
 */
export function remoteScriptCommand(t: SshTarget, step: string, script: string, shell: "sh" | "bash" = "sh"): string {
    const ssh = sshCommand(t, [shell, "-c", script]);
    const where = `${t.user}@${t.host}:${t.port}`;
    return [
        `${ssh}`,
        `rc=$?`,
        `if [ "$rc" -eq 255 ]; then echo ${shellQuote(`${step}: ssh to ${where} failed (unreachable host, key or known_hosts entry)`)} >&2; fi`,
        `exit "$rc"`,
    ].join("\n");
}

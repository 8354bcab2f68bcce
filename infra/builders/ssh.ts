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
 * ssh options shared by every remote command and by the docker provider's `sshOpts`. No ssh_config is read (`-F
 * none`: neither the operator's ~/.ssh/config nor the system's, so no ProxyCommand, ForwardAgent or other host's
 * settings apply). Host keys are always verified against the configured known_hosts file alone, never the global
 * one; BatchMode makes a missing key fail instead of prompting.
 */
export function sshOptions(t: Pick<SshTarget, "privateKeyPath" | "knownHostsFile" | "port">): string[] {
    return [
        "-F",
        "none",
        "-i",
        t.privateKeyPath,
        "-o",
        "IdentitiesOnly=yes",
        "-o",
        `UserKnownHostsFile=${t.knownHostsFile}`,
        "-o",
        "GlobalKnownHostsFile=/dev/null",
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

/** ssh options for a connection of its own, never a session of a shared one: for bulk streams (see sshCommand). */
export const OWN_CONNECTION = ["-o", "ControlPath=none"];

/** How many seconds an idle shared connection stays open for the next session of the same operation. */
export const SHARED_SSH_PERSIST_S = 30;

/** The program's directory in the user's cache, as shell text expanded on the machine where the script runs. */
export const USER_CACHE_DIR = "${XDG_CACHE_HOME:-$HOME/.cache}/vllm-cluster";

/**
 * Where the shared connections' sockets live (a shell word, expanded where the command runs): a directory of the
 * operator's own, made mode 700 (its parents too, when they are made for it), never a world-writable one (whoever owns the socket would see every session sent to it).
 */
export const SHARED_SSH_DIR = `"${USER_CACHE_DIR}/ssh"`;

/** The longest socket directory that leaves room for `/<pid>-<%C>` under the 104 bytes every Unix allows. */
export const SHARED_SSH_DIR_MAX_CHARS = 104 - "/1234567-".length - 40 - 1;

/**
 * Shell words that make an ssh a session of a shared connection. The first session to a host opens the connection
 * (host key verified against the known_hosts file, as every connection) and keeps it as a master; the others of the
 * same engine operation run inside it, with no new handshake or login. Its socket is named after `$PPID`, the
 * process that runs the command: the command provider or the dynamic provider host, which the engine starts for
 * one `pulumi` operation and stops after it. So a later operation never joins an earlier one's connection: it
 * connects anew, checks the host key as the file says then, and fails when the host's sshd is gone. A master left
 * by an operation closes once idle for SHARED_SSH_PERSIST_S.
 */
function sharedConnectionWords(): string[] {
    return ["-o", "ControlMaster=auto", "-o", `"ControlPath=$vcl_ssh_sock"`, "-o", `ControlPersist=${SHARED_SSH_PERSIST_S}`];
}

/**
 * A local shell command line running `remoteArgv` on the target. `shared` (the default) runs it as a session of
 * the operation's shared connection to the host; bulk streams (image and model copies) pass false and open their
 * own, so one master process does not cipher them all on one core. It is one compound command (a brace group), so
 * it can stand anywhere a simple command can: in a pipeline, in `$(...)`, after `&&`.
 */
export function sshCommand(t: SshTarget, remoteArgv: readonly string[], shared = true): string {
    return sshCommandLine(t, shellQuote(shellJoin(remoteArgv)), shared);
}

/**
 * sshCommand with the remote command given as local shell text that expands to one word (for a remote command
 * that carries a value only known when the line runs, such as a script read from its file).
 */
export function sshCommandLine(t: SshTarget, remoteWord: string, shared = true): string {
    const target = shellQuote(`${t.user}@${t.host}`);
    if (!shared) {
        return [...["ssh", ...OWN_CONNECTION, ...sshOptions(t), "--"].map(shellQuote), target, remoteWord].join(" ");
    }
    const words = ["ssh", ...sshOptions(t).map(shellQuote), ...sharedConnectionWords(), "--", target, remoteWord];
    // ssh refuses a socket path of 108 bytes or more (the directory, a pid of up to 7 digits and %C's 40 hex
    // digits); where the directory is too long or cannot be made, the session connects on its own
    return [
        `{ vcl_ssh_dir=${SHARED_SSH_DIR}; vcl_ssh_sock=none;`,
        `if [ \${#vcl_ssh_dir} -le ${SHARED_SSH_DIR_MAX_CHARS} ] && (umask 077 && mkdir -p "$vcl_ssh_dir") 2>/dev/null; then vcl_ssh_sock="$vcl_ssh_dir/$PPID-%C"; fi;`,
        `${words.join(" ")}; }`,
    ].join(" ");
}

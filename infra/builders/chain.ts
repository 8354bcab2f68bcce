/**
 * One stream along a chain of hosts: the source host writes it into an ssh session to the first host that needs it,
 * which consumes it and forwards the same bytes to the next one while it consumes them, and so on. Every link
 * carries one copy, so N hosts take about as long as one, and no byte passes through the operator. What the stream
 * is (an image, model files) is up to the caller: it names the shell commands that write it and that consume it.
 *
 * Hosts reach each other with the operator's key through a forwarded, short-lived ssh-agent that holds only that
 * key, restricted to the chain's own links (`ssh-add -h`): the operator may use it to reach the first host, each
 * host only to reach the one after it, as that host's login user; the agent refuses every other use, so whoever is
 * root on a host in the chain cannot reach any other host, or the same host again, with the key. The host keys
 * that bind those links are the operator's known_hosts entries; hosts also verify each other against those lines,
 * shipped with the command.
 */
import { shellJoin, shellQuote, shellPath } from "./quote";
import { base64, scriptFile, scriptsText } from "./remoteStep";
import { OWN_CONNECTION, SshTarget, sshArgv } from "./ssh";

/**
 * One host in the chain, the known_hosts lines (from the operator's file, under its `target` address) that
 * authenticate it, and the address the host before it dials (`peerHost`: its fabric IP by default; `target.host`
 * when unset). Its host key is checked against those lines whichever address is dialled.
 */
export interface ChainHop {
    node: string;
    target: SshTarget;
    peerHost?: string;
    knownHosts: string[];
}

/** How many seconds the temporary agent keeps the key: connections are all made when the stream starts. */
export const AGENT_KEY_LIFETIME_S = 600;

/** The `ssh-keygen -F` name of a target in known_hosts: `host`, or `[host]:port` off port 22. */
export function knownHostsName(t: Pick<SshTarget, "host" | "port">): string {
    return t.port === 22 ? t.host : `[${t.host}]:${t.port}`;
}

/** Prints the known_hosts lines that authenticate `t` (hashed or not); empty output when there are none. */
export function knownHostsLookupScript(t: SshTarget): string {
    return `ssh-keygen -F ${shellQuote(knownHostsName(t))} -f ${shellPath(t.knownHostsFile)} | grep -v '^#' || true`;
}

/**
 * The one script every host in the chain runs (infra/scripts/chain_hop.bash): a host's part is chosen by its
 * arguments, so nothing is quoted inside quotes and the command stays small however long the chain.
 */
export const HOP_SCRIPT = scriptFile("chain_hop.bash").text;

/**
 * What a chain carries: the text of the script that defines its two ends (save, load, optionally check, and
 * load_name; see chain_hop.bash) and their argument (`$arg` there).
 */
export interface ChainEnds {
    script: string;
    arg: string;
}

/** The ends from scripts of infra/scripts/ (libraries first), and their argument. */
export function chainEnds(names: readonly string[], arg = ""): ChainEnds {
    return { script: scriptsText(names), arg };
}

/** NEXT arguments of a hop script for these hosts. */
function nextArgs(hops: ChainHop[]): string[] {
    return hops.flatMap((h) => [
        h.node,
        `${h.target.user}@${h.peerHost ?? h.target.host}`,
        String(h.target.port),
        base64(h.knownHosts.join("\n") + "\n"),
        knownHostsName(h.target),
    ]);
}

/**
 * The operator's ssh into the chain's first host, with the agent forwarded, running the hop as that host's part:
 * `save WHAT` on the source host, or `load NODE` on the first host to fill; `hops` follow it in order.
 */
export function hopSsh(t: SshTarget, ends: ChainEnds, part: ["save" | "load", string], hops: ChainHop[]): string {
    const remote = [
        "bash",
        "-c",
        'eval "$(printf %s "$1" | base64 -d)"',
        "hop",
        base64(HOP_SCRIPT),
        base64(ends.script),
        base64(`x${ends.arg}x`),
        ...part,
    ];
    const [ssh, ...rest] = sshArgv(t, [...remote, ...nextArgs(hops)]);
    return shellJoin([ssh, "-A", ...OWN_CONNECTION, ...rest]);
}

/**
 * `ssh-add -h` destination constraints for a chain that the operator dials at `path[0]` and that runs on along
 * `path`: `user@first`, then `prev>user@next` for each link. Hosts are named as in known_hosts (`[host]:port` off
 * port 22), where ssh-add looks up the host keys each link is bound to.
 */
export function chainConstraints(path: Pick<SshTarget, "user" | "host" | "port">[]): string[] {
    if (path.length === 0) {
        throw new Error("chainConstraints: no host");
    }
    const name = knownHostsName;
    return path.flatMap((t, i) => ["-h", i === 0 ? `${t.user}@${name(t)}` : `${name(path[i - 1])}>${t.user}@${name(t)}`]);
}

/**
 * The start of the operator's bash script for a chain copy: a private ssh-agent holding only the configured key
 * (it dies with the script), usable only along `path` (chainConstraints): the host the operator dials first, then
 * each host after it. `noAgent` says what to do when the key cannot be added (it has a passphrase).
 */
export function chainAgentScript(key: SshTarget, path: SshTarget[], noAgent: string): string[] {
    const add = ["ssh-add", "-q", "-t", String(AGENT_KEY_LIFETIME_S), "-H", shellPath(key.knownHostsFile)];
    const constraints = shellJoin(chainConstraints(path));
    return [
        "set -uo pipefail",
        'eval "$(ssh-agent -s)" >/dev/null || { echo "cannot start ssh-agent" >&2; exit 1; }',
        "trap 'ssh-agent -k >/dev/null 2>&1' EXIT",
        `${add.join(" ")} ${constraints} ${shellPath(key.privateKeyPath)} </dev/null || { echo ${shellQuote(
            `cannot add ${key.privateKeyPath} to a temporary ssh-agent restricted to the chain's links ` +
                `(OpenSSH 8.9 or later on the operator and every host; ${noAgent})`,
        )} >&2; exit 1; }`,
    ];
}

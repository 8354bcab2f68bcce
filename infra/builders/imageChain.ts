/**
 * Image distribution as a chain: the source streams `docker save` to the first host that needs the image, which
 * loads it and forwards the same bytes to the next one while it loads, and so on. Every link carries one copy, so
 * N hosts take about as long as one, and no image byte passes through the operator (when the source is a host).
 *
 * Hosts reach each other with the operator's key through a forwarded, short-lived ssh-agent that holds only that
 * key, and verify each other's host keys against the operator's own known_hosts lines, shipped with the command.
 */
import { shellJoin, shellQuote } from "./quote";
import { SshTarget, sshOptions } from "./ssh";

/** One host in the chain and the known_hosts lines (from the operator's file) that authenticate it. */
export interface ChainHop {
    node: string;
    target: SshTarget;
    knownHosts: string[];
}

/** Where the chain starts: a host holding the image, or the operator's own engine. */
export type ChainSource = { kind: "host"; node: string; target: SshTarget } | { kind: "local" };

/** How many seconds the temporary agent keeps the key: connections are all made when the stream starts. */
export const AGENT_KEY_LIFETIME_S = 600;

/** The `ssh-keygen -F` name of a target in known_hosts: `host`, or `[host]:port` off port 22. */
export function knownHostsName(t: Pick<SshTarget, "host" | "port">): string {
    return t.port === 22 ? t.host : `[${t.host}]:${t.port}`;
}

/** Prints the known_hosts lines that authenticate `t` (hashed or not); empty output when there are none. */
export function knownHostsLookupScript(t: SshTarget): string {
    return `ssh-keygen -F ${shellQuote(knownHostsName(t))} -f ${shellQuote(t.knownHostsFile)} | grep -v '^#' || true`;
}

/**
 * A command, run on one host, that sends its stdin to `next` over ssh: the host key comes from the lines written
 * to "$d/known_hosts" (no other file is trusted) and the key from the forwarded agent.
 */
function forwardCommand(next: ChainHop, after: ChainHop[]): string {
    const t = next.target;
    const opts = shellJoin([
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
    ]);
    return `ssh -A -o "UserKnownHostsFile=$d/known_hosts" ${opts} -- ${shellQuote(`${t.user}@${t.host}`)} ${shellQuote(
        shellJoin(["bash", "-c", hopScript(next.node, after)]),
    )}`;
}

/** Lines that write `next`'s known_hosts lines into "$d/known_hosts" on the host running them. */
function writeKnownHosts(next: ChainHop): string {
    return `printf '%s\\n' ${next.knownHosts.map(shellQuote).join(" ")} >"$d/known_hosts"`;
}

const TEMP_DIR = ["d=$(mktemp -d) || exit 1", `trap 'rm -rf "$d"' EXIT`];

/**
 * bash script for a host in the chain: loads stdin into its engine and, when hops follow, forwards the same bytes
 * to the next one at the same time (tee into a FIFO read by `docker load`). `tee -p` keeps feeding the rest of the
 * chain if this host's load fails, and this host's load going on if the rest fails; the caller verifies every ID.
 */
export function hopScript(node: string, rest: ChainHop[]): string {
    const tag = shellQuote(`[${node}] `);
    if (rest.length === 0) {
        return ["set -o pipefail", `docker load 2>&1 | sed "s/^/"${tag}"/" >&2`].join("\n");
    }
    const [next, ...after] = rest;
    const forward = forwardCommand(next, after);
    return [
        "set -uo pipefail",
        ...TEMP_DIR,
        'mkfifo "$d/image"',
        writeKnownHosts(next),
        `docker load <"$d/image" >"$d/load.log" 2>&1 & load=$!`,
        `tee -p "$d/image" | ${forward}`,
        "fwd=$?",
        'wait "$load"; rc=$?',
        `sed "s/^/"${tag}"/" "$d/load.log" >&2`,
        `if [ "$rc" -ne 0 ]; then echo ${shellQuote(`docker load failed on node ${node}`)}" (exit $rc)" >&2; exit 1; fi`,
        'exit "$fwd"',
    ].join("\n");
}

/** bash script run on the source host: `docker save` into the first hop. */
export function sourceScript(ref: string, hops: ChainHop[]): string {
    const [first, ...rest] = hops;
    const forward = forwardCommand(first, rest);
    return ["set -uo pipefail", ...TEMP_DIR, writeKnownHosts(first), `${shellJoin(["docker", "save", ref])} | ${forward}`].join("\n");
}

/**
 * The operator's bash script for one chain copy of `ref` to `hops` (in order): starts a private ssh-agent holding
 * only the configured key (it dies with the script), then runs the chain from the source host, or from the local
 * engine into the first hop. Exits non-zero when any link fails; the caller then inspects which hosts hold the image.
 */
export function chainCopyScript(source: ChainSource, ref: string, hops: ChainHop[], key: SshTarget): string {
    if (hops.length === 0) {
        throw new Error("chainCopyScript: no hop");
    }
    const agent = [
        "set -uo pipefail",
        'eval "$(ssh-agent -s)" >/dev/null || { echo "cannot start ssh-agent" >&2; exit 1; }',
        "trap 'ssh-agent -k >/dev/null 2>&1' EXIT",
        `ssh-add -q -t ${AGENT_KEY_LIFETIME_S} ${shellQuote(key.privateKeyPath)} </dev/null || { echo ${shellQuote(
            `cannot add ${key.privateKeyPath} to a temporary ssh-agent (a key with a passphrase needs image.distribution=relay)`,
        )} >&2; exit 1; }`,
    ];
    if (source.kind === "host") {
        const t = source.target;
        const ssh = shellJoin([
            "ssh",
            "-A",
            ...sshOptions(t),
            "--",
            `${t.user}@${t.host}`,
            shellJoin(["bash", "-c", sourceScript(ref, hops)]),
        ]);
        return [...agent, ssh].join("\n");
    }
    const [first, ...rest] = hops;
    const t = first.target;
    const ssh = shellJoin([
        "ssh",
        "-A",
        ...sshOptions(t),
        "--",
        `${t.user}@${t.host}`,
        shellJoin(["bash", "-c", hopScript(first.node, rest)]),
    ]);
    return [...agent, `${shellJoin(["docker", "save", ref])} | ${ssh}`].join("\n");
}

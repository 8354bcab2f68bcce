/**
 * Image distribution as a chain: the source streams `docker save` to the first host that needs the image, which
 * loads it and forwards the same bytes to the next one while it loads, and so on. Every link carries one copy, so
 * N hosts take about as long as one, and no image byte passes through the operator (when the source is a host).
 *
 * Hosts reach each other with the operator's key through a forwarded, short-lived ssh-agent that holds only that
 * key, and verify each other's host keys against the operator's own known_hosts lines, shipped with the command.
 */
import { shellJoin, shellQuote } from "./quote";
import { SshTarget, sshArgv } from "./ssh";

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
 * The one script every host in the chain runs (a host's part is chosen by its arguments, so nothing is quoted inside
 * quotes and the command stays small however long the chain):
 *   HOP save REF  NEXT...   docker save REF into the next host (the source host)
 *   HOP load NODE NEXT...   docker load the stream and, when hosts follow, forward the same bytes at the same time
 * HOP is this script base64-encoded (handed on to the next host); NEXT is, per following host: its node name,
 * user@address, ssh port and known_hosts lines (base64). The next host's key is checked against those lines only,
 * with the key from the forwarded agent. `tee -p` keeps feeding the rest of the chain if this host's load fails,
 * and this host's load going on if the rest fails; the operator then verifies every host's image ID.
 */
export const HOP_SCRIPT = `set -uo pipefail
self=$1 mode=$2 what=$3
shift 3
d=$(mktemp -d) || exit 1
trap 'rm -rf "$d"' EXIT
forward() {
  local node=$1 dest=$2 port=$3
  printf %s "$4" | base64 -d >"$d/known_hosts" || exit 1
  shift 4
  ssh -A -o "UserKnownHostsFile=$d/known_hosts" -o GlobalKnownHostsFile=/dev/null -o StrictHostKeyChecking=yes \\
    -o BatchMode=yes -o ConnectTimeout=10 -p "$port" -- "$dest" \\
    "bash -c 'eval \\"\\$(printf %s \\"\\$1\\" | base64 -d)\\"' hop $self load $node $*"
}
if [ "$mode" = save ]; then
  docker save "$what" | forward "$@"
  exit
fi
if [ $# -eq 0 ]; then
  docker load 2>&1 | sed "s/^/[$what] /" >&2
  exit
fi
mkfifo "$d/image" || exit 1
docker load <"$d/image" >"$d/load.log" 2>&1 &
load=$!
tee -p "$d/image" | forward "$@"
fwd=$?
wait "$load"
rc=$?
sed "s/^/[$what] /" "$d/load.log" >&2
if [ "$rc" -ne 0 ]; then echo "docker load failed on node $what (exit $rc)" >&2; exit 1; fi
exit "$fwd"
`;

/** The remote command line that runs HOP_SCRIPT with `args` (all plain words: names, addresses, base64). */
function hopCommand(args: string[]): string[] {
    return ["bash", "-c", 'eval "$(printf %s "$1" | base64 -d)"', "hop", Buffer.from(HOP_SCRIPT).toString("base64"), ...args];
}

/** The operator's ssh into the chain's first host, with the agent forwarded, running HOP_SCRIPT with `args`. */
function hopSsh(t: SshTarget, args: string[]): string {
    const [ssh, ...rest] = sshArgv(t, hopCommand(args));
    return shellJoin([ssh, "-A", ...rest]);
}

/** NEXT arguments of HOP_SCRIPT for these hosts. */
function nextArgs(hops: ChainHop[]): string[] {
    return hops.flatMap((h) => [
        h.node,
        `${h.target.user}@${h.target.host}`,
        String(h.target.port),
        Buffer.from(h.knownHosts.join("\n") + "\n").toString("base64"),
    ]);
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
        return [...agent, hopSsh(source.target, ["save", ref, ...nextArgs(hops)])].join("\n");
    }
    const [first, ...rest] = hops;
    const ssh = hopSsh(first.target, ["load", first.node, ...nextArgs(rest)]);
    return [...agent, `${shellJoin(["docker", "save", ref])} | ${ssh}`].join("\n");
}

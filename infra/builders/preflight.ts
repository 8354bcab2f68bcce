/**
 * The preflight each host runs before anything is deployed on it: what the manual deployment found broken by hand
 * (docker unreachable, the fabric IP on another interface, a port held by a stopped proxy, a wrong GPU count).
 */
import type { NodeConfig } from "../config";
import { LABEL } from "../contract";
import { compileCacheHostDir, nodeStateDir, sharedTmpHostDir } from "./node";
import { shellQuote } from "./quote";
import { SshTarget, remoteScriptCommand } from "./ssh";

/**
 * Remote script that checks what the seeds found broken by hand: the docker engine answers, the fabric IP is
 * configured on the named interface, no other process holds a host port this node's containers will listen on
 * (`ports`), and (with the nvidia runtime) the GPU count matches. It also creates the node's state dir
 * (<stateDir>/<node>/tmp, the /tmp of every container of the node, and <stateDir>/<node>/cache, its compile
 * caches) as the login user, private to it (0700), refusing one that another user owns. Prints one JSON line of facts: {"node","arch","dockerVersion","gpusSeen"}.
 */
export function preflightScript(n: NodeConfig, stateDir: string, ports: readonly number[]): string {
    const nodeDir = nodeStateDir(stateDir, n.name);
    const dirs = [nodeDir, sharedTmpHostDir(stateDir, n.name), compileCacheHostDir(stateDir, n.name)].map(shellQuote).join(" ");
    const lines = [
        "set -u",
        `node=${shellQuote(n.name)}`,
        `fail() { echo "preflight failed on node $node (${n.sshUser}@${n.sshHost}): $*" >&2; exit 1; }`,
        // Created here, as the login user, before any container: docker would create missing bind-mount
        // sources owned by root, and the API key install (run as the login user) could not write there. They hold
        // what every container executes or trusts (its /tmp, where Ray keeps its session; pickled compile
        // artifacts; the key and token files): owned by the login user, mode 0700, so no other local user of the
        // host can plant or swap anything there. A directory someone else owns is refused, never taken over.
        `sd=${shellQuote(stateDir)}`,
        `[ -L "$sd" ] || ! [ -d "$sd" ] || [ -z "$(find "$sd" -maxdepth 0 -perm -0002 ! -perm -1000)" ] || fail "state dir $sd is writable by every user and not sticky; another user could replace ${nodeDir}"`,
        `(umask 077 && mkdir -p ${dirs}) || fail ${shellQuote(`could not create ${nodeDir} and its tmp and cache directories`)}`,
        `for d in ${dirs}; do`,
        `    if [ -L "$d" ] || ! [ -O "$d" ]; then fail "$d is not a directory owned by $(id -un) (owner: $(stat -c %U "$d" 2>/dev/null)); remove it or give it to $(id -un)"; fi`,
        `    chmod 700 "$d" || fail "could not make $d private (chmod 700)"`,
        `done`,
        `command -v docker >/dev/null 2>&1 || fail "docker CLI not found"`,
        `dver=$(docker version --format '{{.Server.Version}}' 2>&1) || fail "docker engine unreachable: $dver"`,
        `command -v ip >/dev/null 2>&1 || fail "ip (iproute2) not found"`,
        `addrs=$(ip -o -4 addr show dev ${shellQuote(n.fabricInterface)} 2>&1) || fail ${shellQuote(`fabric interface ${n.fabricInterface} not found`)}`,
        `printf '%s\\n' "$addrs" | grep -qF ${shellQuote(`inet ${n.fabricIp}/`)} || fail ${shellQuote(
            `fabric IP ${n.fabricIp} is not on interface ${n.fabricInterface}`,
        )}" (has: $(printf '%s\\n' "$addrs" | awk '{print $4}' | tr '\\n' ' '))"`,
        ...portsFreeLines(ports),
    ];
    if (n.gpuRuntime === "nvidia") {
        lines.push(
            `command -v nvidia-smi >/dev/null 2>&1 || fail "nvidia-smi not found (gpuRuntime is nvidia)"`,
            `gpus=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU ' || true)`,
            `[ "$gpus" -eq ${n.gpus} ] || fail "expected ${n.gpus} GPU(s), nvidia-smi -L lists $gpus"`,
        );
    } else {
        lines.push(`gpus=${n.gpus}`);
    }
    lines.push(
        `arch=$(uname -m)`,
        `printf '{"node":"%s","arch":"%s","dockerVersion":"%s","gpusSeen":%s}\\n' "$node" "$arch" "$dver" "$gpus"`,
    );
    return lines.join("\n");
}

export function preflightCommand(t: SshTarget, n: NodeConfig, stateDir: string, ports: readonly number[]): string {
    return remoteScriptCommand(t, `preflight on node ${n.name}`, preflightScript(n, stateDir, ports));
}

/**
 * Preflight lines (POSIX sh, after `fail` and `node` are defined) that fail naming each port another process
 * already listens on (TCP, any address, from `ss -Hltn`). Our own listeners are accepted: while a project
 * container (label vllm-cluster.managed=true) runs on the host, a held port is taken to be ours, so preflight
 * re-runs against a deployed cluster. Without `ss` the check is skipped with a warning on stderr. No ports: no lines.
 */
function portsFreeLines(ports: readonly number[]): string[] {
    if (ports.length === 0) {
        return [];
    }
    const list = ports.join(" ");
    const skip = `not checking that ports ${list} are free`;
    return [
        `if ! command -v ss >/dev/null 2>&1; then`,
        `    echo "preflight warning on node $node: ss (iproute2) not found; ${skip}" >&2`,
        `elif ! listening=$(ss -Hltn 2>&1); then`,
        `    echo "preflight warning on node $node: ss -Hltn failed ($listening); ${skip}" >&2`,
        `else`,
        `    taken=""`,
        `    for p in ${list}; do`,
        `        printf '%s\\n' "$listening" | grep -Eq ":\${p}[[:space:]]" && taken="$taken $p"`,
        `    done`,
        `    if [ -n "$taken" ]; then`,
        `        ours=$(docker ps --quiet --filter ${shellQuote(`label=${LABEL.managed}=true`)} 2>&1) || fail "docker ps failed: $ours"`,
        `        if [ -z "$ours" ]; then`,
        `            msg=""`,
        `            for p in $taken; do msg="$msg; port $p is already in use on the host, not by this project (see who holds it: ss -ltnp 'sport = :$p')"; done`,
        `            fail "\${msg#; }"`,
        `        fi`,
        `    fi`,
        `fi`,
    ];
}

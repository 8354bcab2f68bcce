/**
 * The distribution chain's forwarded agent against the simulated hosts' real sshd and ssh-agent (OpenSSH's
 * destination constraints, `ssh-add -h`): the key it forwards works on the chain's own link and nowhere else. The
 * control case (the same agent without constraints) shows what a host in the chain could do before: reach any host
 * the key opens, itself included.
 */
import * as path from "path";
import { chainAgentScript, knownHostsLookupScript } from "../../infra/builders/chain";
import { shellJoin, shellQuote } from "../../infra/builders/quote";
import { OWN_CONNECTION, SshTarget, sshArgv } from "../../infra/builders/ssh";
import { Hosts, runArgv, stackConfig } from "./hosts";

const hosts = new Hosts(stackConfig(path.join(__dirname, "..", "..", "stacks", "Pulumi.local.yaml")));
const [first, second] = hosts.cfg.nodes.map((n) => hosts.target(n.name));

/** On `via`, with the agent forwarded: ssh to `to` with the agent's key only, host key checked; prints "reached". */
async function reachThrough(agent: string[], via: SshTarget, to: SshTarget): Promise<{ code: number; stderr: string }> {
    const kh = (await runArgv(["bash", "-c", knownHostsLookupScript(to)])).stdout;
    const inner = [
        "set -u",
        "d=$(mktemp -d) && trap 'rm -rf \"$d\"' EXIT",
        `printf '%s' ${shellQuote(kh)} >"$d/kh"`,
        // the forwarded agent is the only key: no key file on the host is tried
        `ssh -o IdentitiesOnly=no -o IdentityFile=none -o "UserKnownHostsFile=$d/kh" -o GlobalKnownHostsFile=/dev/null ` +
            `-o StrictHostKeyChecking=yes -o BatchMode=yes -o ConnectTimeout=10 -p ${to.port} -- ${shellQuote(`${to.user}@${to.host}`)} echo reached`,
    ].join("\n");
    const [ssh, ...rest] = sshArgv(via, ["bash", "-c", inner]);
    const script = [...agent, shellJoin([ssh, "-A", ...OWN_CONNECTION, ...rest])].join("\n");
    const r = await runArgv(["bash", "-c", script], { timeoutMs: 60_000 });
    if (r.code === 0 && !r.stdout.includes("reached")) {
        throw new Error(`ssh through ${via.host} exited 0 without reaching ${to.host}: ${r.stdout}`);
    }
    return { code: r.code, stderr: r.stderr };
}

describe("the chain's forwarded agent", () => {
    const chained = chainAgentScript(first, [first, second], "test");
    const unconstrained = chained.map((l) => l.replace(/ -H \S+( -h \S+)+/, ""));

    test("the constrained key opens the chain's link (first host to the next)", async () => {
        expect(chained.join("\n")).toMatch(/ssh-add .* -h /);
        const r = await reachThrough(chained, first, second);
        expect(r).toMatchObject({ code: 0 });
    });

    test("and nothing else: the first host cannot reach itself again with it (the agent refuses to sign)", async () => {
        const r = await reachThrough(chained, first, first);
        expect(r.code).not.toBe(0);
        expect(r.stderr).toMatch(/Permission denied \(publickey/);
    });

    test("control: without the constraints, the same forwarded key reaches anywhere it works", async () => {
        expect(unconstrained.join("\n")).not.toMatch(/ -h /);
        expect(await reachThrough(unconstrained, first, first)).toMatchObject({ code: 0 });
    });
});

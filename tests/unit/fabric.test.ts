/**
 * distribution.network: which address a host dials for the next host of a chain copy (image, model), and what each
 * host's preflight checks before it. The operator's own connections stay on the management address either way.
 */
import { ClusterConfig, validateConfig } from "../../infra/config";
import { shellQuote } from "../../infra/builders/quote";
import { Rec, Run, loadStackRaw, runStack } from "./harness";

type Raw = Record<string, any>; // eslint-disable-line @typescript-eslint/no-explicit-any
const arg = (a: string) => `vcl_args="$vcl_args "${shellQuote(shellQuote(a))}`;

function configOf(stack: string, edit: (raw: Raw) => void = () => undefined): ClusterConfig {
    const raw = JSON.parse(JSON.stringify(loadStackRaw(stack))) as Raw;
    edit(raw);
    return validateConfig(raw);
}
function get(run: Run, name: string): Rec {
    const r = run.byName.get(name);
    if (!r) throw new Error(`no resource ${name}`);
    return r;
}
interface Member {
    node: string;
    target: { host: string; port: number };
    peerHost: string;
}
const preflightOf = (run: Run, node: string) => get(run, `${node}-preflight`).inputs.create as string;

describe("distribution.network", () => {
    test("default fabric: chain members are dialled at their fabric IP, the operator still reaches them at sshHost", async () => {
        const cfg = configOf("four-node", (r) => (r.model.source = "gpu-2"));
        expect(cfg.distribution.network).toBe("fabric");
        const run = await runStack("four-node", cfg);
        for (const chain of ["image-chain", "model-chain"]) {
            const members = get(run, chain).inputs.members as Member[];
            expect(members.length).toBeGreaterThan(0);
            for (const m of members) {
                const n = cfg.nodes.find((x) => x.name === m.node)!;
                expect([chain, m.node, m.peerHost, m.target.host]).toEqual([chain, n.name, n.fabricIp, n.sshHost]);
            }
        }
    });

    test("each host's preflight checks every other host's sshd at the address the chain dials, naming the network", async () => {
        const cfg = configOf("four-node");
        const run = await runStack("four-node", cfg);
        for (const n of cfg.nodes) {
            const create = preflightOf(run, n.name);
            const others = cfg.nodes.filter((p) => p !== n);
            for (const p of others) expect(create).toContain(arg(`ssh-peer=${p.name}@${p.fabricIp}:${p.sshPort}:fabric`));
            expect(create.match(/ssh-peer=/g)).toHaveLength(others.length);
        }
    });

    test("management: members are dialled at sshHost, and preflight checks the sshHost addresses", async () => {
        const cfg = configOf("four-node", (r) => (r.distribution = { network: "management" }));
        const run = await runStack("four-node", cfg);
        for (const m of get(run, "image-chain").inputs.members as Member[]) expect(m.peerHost).toBe(m.target.host);
        const head = cfg.nodes[0];
        const p = cfg.nodes[1];
        expect(preflightOf(run, head.name)).toContain(arg(`ssh-peer=${p.name}@${p.sshHost}:${p.sshPort}:management`));
    });

    test("no host copies to another (image from a registry, no model source): no peer check", async () => {
        const cfg = configOf("four-node", (r) => (r.image = { ...r.image, source: "registry", sourceNode: undefined }));
        const run = await runStack("four-node", cfg);
        for (const n of cfg.nodes) expect(preflightOf(run, n.name)).not.toContain("ssh-peer=");
    });

    test("a bad network is named before any host is touched", () => {
        expect(() => configOf("local", (r) => (r.distribution = { network: "infiniband" }))).toThrow(/distribution\.network: /);
        expect(() => configOf("local", (r) => (r.distribution = { netwrok: "fabric" }))).toThrow("distribution.netwrok: unknown key");
    });
});

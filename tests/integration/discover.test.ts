/**
 * Discovery on the simulated hosts, as the README's "From two bare Sparks" and docs/deploy.md run it: pin the host
 * keys (the command discovery prints, after comparing the fingerprints with the hosts' own key files), discover
 * spark-1 and spark-2, review the file, preview, up. Then the refusals on real hosts: a changed host key, an extra
 * interface on the fabric, a second shared subnet, an unreachable host; each writes nothing. Run by
 * tests/integration/run.sh.
 */
import { spawnSync } from "child_process";
import * as fs from "fs";
import * as os from "os";
import * as path from "path";
import { Project, changed, destroy, expectOk, openProject, preview, removeProject, up, withoutMonitoring } from "./engine";
import { Hosts, stackConfig } from "./hosts";
import { chat, completionTokens } from "./support";

// eslint-disable-next-line @typescript-eslint/no-require-imports
const yaml = require("js-yaml") as { load(s: string): unknown };

const ROOT = path.join(__dirname, "..", "..");
const TESTBED = process.env.VCL_TESTBED_DIR ?? "/var/lib/vllm-cluster-testbed";
const IDENTITY = path.join(TESTBED, "ssh", "id_ed25519");
const HOSTS = ["root@10.231.0.11", "root@10.231.0.12"];
const STACK = "discovered";

let dir: string;
let knownHosts: string;
let p: Project | undefined;

interface Discovery {
    code: number | null;
    out: string;
    err: string;
}

/** `npm run discover -- ARGS`, as the README and docs/deploy.md print it (node directly: npm would add its own lines). */
function discover(args: string[], out: string, identity = IDENTITY): Discovery {
    const r = spawnSync(
        "node",
        [
            "setup/discover.js",
            "--known-hosts",
            knownHosts,
            "--identity",
            identity,
            "--template",
            "stacks/Pulumi.local.yaml",
            "--out",
            out,
            ...args,
        ],
        { cwd: ROOT, encoding: "utf8", env: { ...process.env }, timeout: 180_000 },
    );
    return { code: r.status, out: r.stdout, err: r.stderr };
}

/** Runs `argv` in a simulated host's network namespace (interfaces added for a test, removed after it). */
function inHostNet(index: number, cmd: string): void {
    const r = spawnSync("ip", ["netns", "exec", `vcl-h${index}`, "sh", "-c", cmd], { encoding: "utf8" });
    if (r.status !== 0) throw new Error(`vcl-h${index}: ${cmd}: ${r.stderr}`);
}

function fingerprint(pubFile: string): string {
    return spawnSync("ssh-keygen", ["-lf", pubFile], { encoding: "utf8" }).stdout.split(" ")[1];
}

beforeAll(() => {
    dir = fs.mkdtempSync(path.join(os.tmpdir(), "vcl-discover-"));
    knownHosts = path.join(dir, "known_hosts");
    fs.writeFileSync(knownHosts, "");
});

afterAll(async () => {
    for (const i of [1, 2]) spawnSync("ip", ["netns", "exec", `vcl-h${i}`, "ip", "link", "del", "extra0"]);
    if (p) {
        if (process.env.VCL_INTEGRATION_KEEP !== "1") await destroy(p);
        removeProject(p);
    }
    fs.rmSync(dir, { recursive: true, force: true });
}, 600_000);

describe("from two bare hosts: pin, discover, review, preview, up", () => {
    test("1. unknown hosts: their fingerprints (the hosts' own) and the command that pins them; nothing written", () => {
        const out = path.join(dir, "first.yaml");
        const r = discover(HOSTS, out);
        expect(r.code).toBe(2);
        expect(fs.existsSync(out)).toBe(false);
        expect(r.err).toContain("discovery never trusts a key on first use");
        for (const i of [1, 2]) {
            expect(r.err).toContain(fingerprint(path.join(TESTBED, "hosts", `spark-${i}`, "ssh_host_ed25519_key.pub")));
        }
        expect(r.err).toMatch(/Nothing was written\.\n$/);
        // The operator compared the fingerprints; now runs the printed pin commands, as printed.
        const pins = r.err.split("\n").filter((l) => l.trim().startsWith("printf '%s\\n' "));
        expect(pins).toHaveLength(2);
        for (const cmd of pins) {
            expect(spawnSync("bash", ["-c", cmd], { encoding: "utf8" }).status).toBe(0);
        }
        expect(fs.readFileSync(knownHosts, "utf8").split("\n").filter(Boolean)).toHaveLength(2);
    });

    test("2. discovery of spark-1 and spark-2 gives the local stack's node settings", () => {
        const out = path.join(dir, "discovered.yaml");
        const r = discover(HOSTS, out);
        expect(r.err).toBe("");
        expect(r.code).toBe(0);
        expect(r.out).toContain("2 nodes, fabric 10.232.0.0/24, head spark-1");
        const local = stackConfig(path.join(ROOT, "stacks", "Pulumi.local.yaml"));
        const found = stackConfig(out);
        expect(found.nodes).toEqual(local.nodes);
        expect(found.ssh).toEqual({ privateKeyPath: IDENTITY, knownHostsFile: knownHosts });
        // 3. review: each node carries its evidence
        const text = fs.readFileSync(out, "utf8");
        expect(text).toMatch(/# spark-1: x86_64, \d+ CPUs .*no NVIDIA GPU \(nvidia-smi absent\)/);
        expect(text).toContain("# reached on 10.231.0.11 (mgmt0, 10.231.0.0/24); fabric 10.232.0.0/24 on fabric0");
        expect((yaml.load(text) as { encryptionsalt?: string }).encryptionsalt).toBeUndefined();
    });

    test("4-5. pulumi preview, then pulumi up of the generated stack converges and serves; a second preview changes nothing", async () => {
        // Start from hosts with no container of any project stack (the other stacks use the same container names).
        const hosts = new Hosts(stackConfig(path.join(dir, "discovered.yaml")));
        for (const n of ["spark-1", "spark-2"]) {
            await hosts.removeProjectContainers(n);
        }
        // The project as checked out, with the discovered file as its stack file; `pulumi stack init` adds the salt.
        p = await openProject(STACK, "vcl-it-discover-", path.join(dir, "discovered.yaml"));
        // the template's monitoring section came along; this file is about discovery (monitoring: cluster.test.ts)
        withoutMonitoring(p);
        expect(stackConfig(p.stackFile).nodes).toEqual(stackConfig(path.join(dir, "discovered.yaml")).nodes);
        const pre = expectOk(await preview(p));
        expect(changed(pre)).toEqual(expect.arrayContaining(["create ray-head-container", "create serve-readiness"]));
        const r = expectOk(await up(p));
        const endpoint = r.outputs.endpoint as string;
        const ok = await chat(endpoint, "tiny-qwen2", r.outputs.apiKey as string);
        expect(ok.status).toBe(200);
        expect(completionTokens(ok)).toBeGreaterThan(0);
        expect(changed(expectOk(await preview(p)))).toEqual([]);
    }, 1_800_000);
});

describe("refusals on the simulated hosts: named, and nothing written", () => {
    const out = () => path.join(dir, "refused.yaml");

    afterEach(() => {
        for (const i of [1, 2]) spawnSync("ip", ["netns", "exec", `vcl-h${i}`, "ip", "link", "del", "extra0"]);
        expect(fs.existsSync(out())).toBe(false);
    });

    test("one more interface on the fabric subnet: refuses, naming both", () => {
        inHostNet(1, "ip link add extra0 type veth peer name extra0p && ip addr add 10.232.0.21/24 dev extra0");
        const r = discover(HOSTS, out());
        expect(r.code).toBe(2);
        expect(r.err).toContain(
            "cannot tell which of spark-1's interfaces is its fabric: 2 addresses on 10.232.0.0/24: fabric0 10.232.0.11 and extra0 10.232.0.21. Choose with --fabric-interface spark-1=fabric0.",
        );
    });

    test("a second subnet every host shares: refuses, naming both candidates and the flag; a fabric they cannot reach each other on is refused too", () => {
        for (const i of [1, 2]) inHostNet(i, `ip link add extra0 type veth peer name extra0p && ip addr add 10.233.0.1${i}/24 dev extra0`);
        const r = discover(HOSTS, out());
        expect(r.code).toBe(2);
        expect(r.err).toContain(
            "cannot tell which subnet is the fabric: 2 candidates, every host has an address on each: 10.232.0.0/24 (spark-1 fabric0 10.232.0.11, spark-2 fabric0 10.232.0.12); 10.233.0.0/24 (spark-1 extra0 10.233.0.11, spark-2 extra0 10.233.0.12). Choose one with --fabric SUBNET",
        );
        const chosen = discover(["--fabric", "10.233.0.0/24", ...HOSTS], out());
        expect(chosen.code).toBe(2);
        expect(chosen.err).toContain(
            "the hosts do not reach each other on the fabric:\nspark-1 cannot reach 10.233.0.12:22 on the fabric (10.233.0.0/24)",
        );
    });

    test("a changed host key is refused as such", () => {
        const pinned = fs.readFileSync(knownHosts, "utf8");
        const other = spawnSync("sh", ["-c", `ssh-keygen -q -t ed25519 -N '' -f ${dir}/other && cat ${dir}/other.pub`], {
            encoding: "utf8",
        }).stdout;
        fs.writeFileSync(knownHosts, pinned.replace(/^10\.231\.0\.12 .*$/m, `10.231.0.12 ${other.split(" ").slice(0, 2).join(" ")}`));
        try {
            const r = discover(HOSTS, out());
            expect(r.code).toBe(2);
            expect(r.err).toContain("root@10.231.0.12: its host key does not match the one pinned in");
            expect(r.err).not.toContain("root@10.231.0.11:");
        } finally {
            fs.writeFileSync(knownHosts, pinned);
        }
    });

    test("an unreachable host and a refused login key are named with their causes", () => {
        const gone = discover([...HOSTS, "root@10.231.0.99"], out());
        expect(gone.code).toBe(2);
        expect(gone.err).toContain("root@10.231.0.99: not in");
        expect(gone.err).toContain("no SSH server answered a key scan on port 22");
        const stranger = path.join(dir, "stranger");
        spawnSync("ssh-keygen", ["-q", "-t", "ed25519", "-N", "", "-f", stranger]);
        const r = discover([HOSTS[0]], out(), stranger);
        expect(r.code).toBe(2);
        expect(r.err).toContain(`root@10.231.0.11: it refused the login: ${stranger} is not accepted for root`);
    });
});

/**
 * A host that lies: spark-2 answers discovery's sessions through a STAND-IN for a hostile host's bash, which runs the
 * real probe and then rewrites what it printed (lie.py; the mode file says which lie). Only sessions with this
 * test's own key get it (a forced command in the testbed's authorized_keys puts spark-2's own directory first on
 * PATH; spark-1 has no such directory), so nothing else on the simulated hosts changes.
 */
describe("a host that lies: what it says is printable text in the stack file, or refused naming the host and the fact", () => {
    const LIAR = path.join(TESTBED, "hosts", "spark-2", "own", "discover-liar");
    const ON_HOST = path.posix.join(TESTBED, "own", "discover-liar");
    const AUTHORIZED = path.join(TESTBED, "ssh", "authorized_keys");
    let key: string;
    let line: string;
    const out = () => path.join(dir, "lied.yaml");

    const LIE_PY = String.raw`import json, sys
mode = sys.argv[1]
for raw in sys.stdin.read().split("\n"):
    f = raw.split("\t")
    if mode == "cpu" and f[0] == "cpu":
        raw = "cpu\tAMD EPYC\r      env: {LD_PRELOAD: /tmp/x.so}\r    #"
    if mode == "nvidia" and f[0] == "nvidia_smi":
        raw = "nvidia_smi\terror\tNVIDIA-SMI has failed\u2028      env: {HTTPS_PROXY: http://203.0.113.9:3128}\u2028    #"
    if mode == "hostname" and f[0] == "hostname":
        raw = "hostname\tspark-2\r      env: {LD_PRELOAD: /tmp/x.so}"
    if mode == "runtime" and f[0] == "docker" and f[1] == "ok":
        raw = "\t".join(f[:3] + [json.dumps({"runc\n      env: {LD_PRELOAD: /tmp/x.so}": {"path": "runc"}})])
    if mode == "addresses" and f[0] == "addr" and f[1] == "fabric0":
        raw += "".join("\naddr\tfabric1\t" + a for a in ("192.168.200.0x0d/24", "1.192.168.200.13/24", "192.168.200. 13/24"))
    sys.stdout.write(raw + ("\n" if raw else ""))
`;

    beforeAll(() => {
        fs.mkdirSync(LIAR, { recursive: true });
        fs.writeFileSync(path.join(LIAR, "lie.py"), LIE_PY);
        fs.writeFileSync(
            path.join(LIAR, "bash"),
            "#!/bin/sh\n# STAND-IN for a hostile host's bash (tests/integration/discover.test.ts): the real one, its output rewritten\n" +
                `/bin/bash "$@" | python3 ${ON_HOST}/lie.py "$(cat ${ON_HOST}/mode)"\n`,
            { mode: 0o755 },
        );
        key = path.join(dir, "liar_key");
        spawnSync("ssh-keygen", ["-q", "-t", "ed25519", "-N", "", "-C", "vcl-discover-liar", "-f", key]);
        const pub = fs.readFileSync(`${key}.pub`, "utf8").trim();
        line = `command="exec env PATH=${ON_HOST}:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin sh -c \\"$SSH_ORIGINAL_COMMAND\\"" ${pub}`;
        fs.appendFileSync(AUTHORIZED, `${line}\n`);
    });

    afterAll(() => {
        const kept = fs
            .readFileSync(AUTHORIZED, "utf8")
            .split("\n")
            .filter((l) => l !== line);
        fs.writeFileSync(AUTHORIZED, kept.join("\n"));
        fs.rmSync(LIAR, { recursive: true, force: true });
    });

    afterEach(() => fs.rmSync(out(), { force: true }));

    /** Discovery of both hosts with spark-2 telling `mode`'s lie. */
    function lie(mode: string): Discovery {
        fs.writeFileSync(path.join(LIAR, "mode"), `${mode}\n`);
        return discover(HOSTS, out(), key);
    }

    test.each([
        ["cpu", "a CR in its CPU model", "\\x0d      env: {LD_PRELOAD: /tmp/x.so}\\x0d    #"],
        ["nvidia", "U+2028 in nvidia-smi's error", "\\u{2028}      env: {HTTPS_PROXY: http://203.0.113.9:3128}\\u{2028}    #"],
    ])("%s (%s, with YAML after it): written as visible escapes; the nodes are the honest ones", (mode, _what, escaped) => {
        const r = lie(mode);
        expect(r.err).toBe("");
        expect(r.code).toBe(0);
        const text = fs.readFileSync(out(), "utf8");
        expect(text).toContain(escaped);
        expect(text).not.toMatch(/[\r\u0085\u2028\u2029]/);
        // the same nodes as the honest discovery of these hosts (the local stack's), read as yaml, js-yaml and go-yaml would
        const local = stackConfig(path.join(ROOT, "stacks", "Pulumi.local.yaml"));
        expect(stackConfig(out()).nodes).toEqual(local.nodes);
        const goYaml = text.replace(/\r\n?|[\u0085\u2028\u2029]/g, "\n");
        expect((yaml.load(goYaml) as { config: Record<string, unknown> }).config["vllm-cluster:nodes"]).toEqual(
            (yaml.load(text) as { config: Record<string, unknown> }).config["vllm-cluster:nodes"],
        );
        expect(text).not.toMatch(/^\s+(LD_PRELOAD|HTTPS_PROXY):/m);
    });

    test.each([
        ["hostname", 'hostname "spark-2\\x0d      env: {LD_PRELOAD: /tmp/x.so}" is not a host name (letters, digits, - _ and .)'],
        ["runtime", 'docker runtime "runc\\x0a      env: {LD_PRELOAD: /tmp/x.so}" is not a runtime name'],
    ])("%s that breaks the rule of such a name: refused naming spark-2 and the fact; nothing written", (mode, why) => {
        const r = lie(mode);
        expect(r.code).toBe(2);
        expect(r.err).toContain(`root@10.231.0.12: its probe says ${why}`);
        expect(r.err).not.toContain("root@10.231.0.11: its probe");
        expect(r.err).not.toMatch(/[\r\u2028]/);
        expect(fs.existsSync(out())).toBe(false);
    });

    test("fabric addresses that are no IPv4 address (192.168.200.0x0d, 1.192.168.200.13, 192.168.200. 13): each refused and named", () => {
        const r = lie("addresses");
        expect(r.code).toBe(2);
        for (const bad of ["192.168.200.0x0d/24", "1.192.168.200.13/24", "192.168.200. 13/24"]) {
            expect(r.err).toContain(
                `root@10.231.0.12: its probe says address of fabric1 "${bad}" is not an IPv4 address with a prefix length (a.b.c.d/n)`,
            );
        }
        expect(fs.existsSync(out())).toBe(false);
    });
});

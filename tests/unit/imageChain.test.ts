/**
 * The chain copy with its real scripts run by bash, against stand-in `ssh` and `docker` commands on PATH (in
 * tests/unit/fixtures/chain-bin): `ssh` runs the remote command here as the named host and records the options and
 * the known_hosts file each hop was given; `docker` keeps one image per host as a file. The real ssh-agent and
 * ssh-add run. What is checked is the chain's plumbing: who streams to whom, in which order, with which host keys,
 * skipping hosts that hold the image and naming those a failure left without it. The simulated hosts run it for real
 * (the integration and bench stages).
 */
import { execFileSync, spawnSync } from "child_process";
import * as fs from "fs";
import * as os from "os";
import * as path from "path";
import { ChainHop, chainConstraints, knownHostsName } from "../../infra/builders/chain";
import { HOP_SCRIPT } from "../../infra/builders/chain";
import { imageEnsureScript, imageInspectScript, sameImage } from "../../infra/builders/image";
import { chainCopyScript } from "../../infra/builders/imageChain";
import type { SshTarget } from "../../infra/builders/ssh";
import { imageChainProvider } from "../../infra/providers/imageChain";
import { generatedHostKeys } from "./hostKeys";

const BIN = path.join(__dirname, "fixtures", "chain-bin");
let dir: string;
let key: string;
let knownHosts: string;
const savedPath = process.env.PATH;

function target(i: number, port = 22): SshTarget {
    return { user: "root", host: `10.9.0.${10 + i}`, port, privateKeyPath: key, knownHostsFile: knownHosts };
}
const node = (i: number) => `spark-${i}`;
const member = (i: number) => ({ node: node(i), target: target(i) });
const hostDir = (t: SshTarget) => path.join(dir, "hosts", t.host);
const image = (t: SshTarget) => path.join(hostDir(t), "image");
/** Host i's public key: real keys, since ssh-add looks them up to bind the agent's chain constraints. */
const HOST_KEYS = generatedHostKeys(4);
const hostKey = (i: number) => HOST_KEYS[i - 1];

/** The chain's connections (ssh -A), one line each: "<from> -> <to> agent=<yes|no-key> kh=<known_hosts lines>". */
function hops(): string[] {
    const f = path.join(dir, "ssh.log");
    return fs.existsSync(f) ? fs.readFileSync(f, "utf8").trim().split("\n") : [];
}

beforeEach(() => {
    dir = fs.mkdtempSync(path.join(os.tmpdir(), "vcl-chain-"));
    key = path.join(dir, "id_ed25519");
    execFileSync("ssh-keygen", ["-q", "-t", "ed25519", "-N", "", "-f", key]);
    knownHosts = path.join(dir, "known_hosts");
    fs.writeFileSync(knownHosts, [1, 2, 3, 4].map((i) => `${target(i).host} ${hostKey(i)}`).join("\n") + "\n");
    for (const i of [1, 2, 3, 4]) fs.mkdirSync(hostDir(target(i)), { recursive: true });
    fs.writeFileSync(image(target(1)), Buffer.alloc(3 << 20, 7)); // the source's image: 3 MiB, larger than a pipe
    process.env.PATH = `${BIN}:${savedPath}`;
    process.env.CHAIN_TEST_DIR = dir;
});
afterEach(() => {
    process.env.PATH = savedPath;
    delete process.env.CHAIN_TEST_DIR;
    delete process.env.CHAIN_TEST_FAIL_LOAD;
    delete process.env.CHAIN_TEST_ALTER_LOAD;
    delete process.env.CHAIN_TEST_UNPACK_ERROR;
    fs.rmSync(dir, { recursive: true, force: true });
});

const source = () => ({ kind: "host" as const, node: node(1), target: target(1) });
const inputs = (members: number[]) => ({ ref: "img:1", source: source(), members: members.map(member) });

test("known_hosts names: plain host on port 22, [host]:port otherwise", () => {
    expect(knownHostsName(target(2))).toBe("10.9.0.12");
    expect(knownHostsName(target(2, 2222))).toBe("[10.9.0.12]:2222");
});

test("the scripts are valid bash, and the command grows linearly with the chain (no quoting inside quoting)", () => {
    const h = (i: number): ChainHop => ({ ...member(i), knownHosts: [`${target(i).host} ${hostKey(i)}`] });
    const script = chainCopyScript(source(), "img:1", [h(2), h(3), h(4)], target(1));
    execFileSync("bash", ["-n", "-c", script]);
    execFileSync("bash", ["-n", "-c", HOP_SCRIPT]);
    expect(script).toContain("ssh-agent");
    expect(script).toMatch(/ssh-add -q -t 600 /);
    const long = chainCopyScript(
        source(),
        "img:1",
        Array.from({ length: 32 }, (_, i) => h(i + 2)),
        target(1),
    );
    const perHop = (long.length - script.length) / 29;
    expect(perHop).toBeLessThan(300);
    expect(long.length).toBeLessThan(16_000);
});

test("the agent's key is bound to the chain's links only: operator to the first host, then each host to the next", () => {
    const h = (i: number): ChainHop => ({ ...member(i), knownHosts: [`${target(i).host} ${hostKey(i)}`] });
    const add = (script: string) => script.split("\n").find((l) => l.startsWith("ssh-add "));
    expect(add(chainCopyScript(source(), "img:1", [h(2), h(3)], target(1)))).toContain(
        ` -H ${knownHosts} -h root@10.9.0.11 -h '10.9.0.11>root@10.9.0.12' -h '10.9.0.12>root@10.9.0.13' ${key} `,
    );
    // from the operator's engine, the first host to fill is the first link
    expect(add(chainCopyScript({ kind: "local" }, "img:1", [h(3), h(2)], target(1)))).toContain(
        ` -h root@10.9.0.13 -h '10.9.0.13>root@10.9.0.12' ${key} `,
    );
    expect(chainConstraints([target(2, 2222), { ...target(3), user: "ops" }])).toEqual([
        "-h",
        "root@[10.9.0.12]:2222",
        "-h",
        "[10.9.0.12]:2222>ops@10.9.0.13",
    ]);
});

test("a host missing from the operator's known_hosts gets no key: the agent refuses to bind a link it cannot verify", () => {
    const h = (i: number): ChainHop => ({ ...member(i), knownHosts: [`${target(i).host} ${hostKey(i)}`] });
    fs.writeFileSync(knownHosts, [1, 2].map((i) => `${target(i).host} ${hostKey(i)}`).join("\n") + "\n");
    const r = spawnSync("bash", ["-c", chainCopyScript(source(), "img:1", [h(2), h(3)], target(1))], { encoding: "utf8" });
    expect(r.status).toBe(1);
    expect(r.stderr).toContain('No host keys found for destination "10.9.0.13"');
    expect(r.stderr).toContain("to a temporary ssh-agent restricted to the chain's links");
    expect(hops()).toEqual([]);
});

test("create streams source -> spark-2 -> spark-3 -> spark-4, each host checking the next one's key", async () => {
    const r = await imageChainProvider.create!(inputs([2, 3, 4]));
    const want = fs.readFileSync(image(target(1)));
    for (const i of [2, 3, 4]) expect(fs.readFileSync(image(target(i))).equals(want)).toBe(true);
    const ssh = hops();
    // one connection from the operator (to the source), then host to host; no image byte through the operator
    expect(ssh.map((l) => l.split(" agent=")[0])).toEqual([
        "operator -> 10.9.0.11",
        "10.9.0.11 -> 10.9.0.12",
        "10.9.0.12 -> 10.9.0.13",
        "10.9.0.13 -> 10.9.0.14",
    ]);
    expect(ssh.every((l) => l.includes("agent=yes"))).toBe(true);
    // each hop trusts exactly the next host's key from the operator's known_hosts, and nothing else
    expect(ssh[1]).toContain(`kh=10.9.0.12 ${hostKey(2)}|`);
    expect(ssh[3]).toContain(`kh=10.9.0.14 ${hostKey(4)}|`);
    expect(ssh[3]).not.toContain(hostKey(3));
    const outs = r.outs as { sourceId: string; imageIds: Record<string, string>; copied: string[] };
    expect(outs.copied).toEqual(["spark-2", "spark-3", "spark-4"]);
    expect(new Set(Object.values(outs.imageIds))).toEqual(new Set([outs.sourceId]));
});

test("hosts holding the image are left out of the chain; nothing to copy opens no stream", async () => {
    fs.copyFileSync(image(target(1)), image(target(3)));
    const r = await imageChainProvider.create!(inputs([2, 3, 4]));
    expect(hops().map((l) => l.split(" agent=")[0])).toEqual(["operator -> 10.9.0.11", "10.9.0.11 -> 10.9.0.12", "10.9.0.12 -> 10.9.0.14"]);
    expect((r.outs as { copied: string[] }).copied).toEqual(["spark-2", "spark-4"]);
    fs.rmSync(path.join(dir, "ssh.log"));
    await imageChainProvider.update!("img:1@chain", r.outs, inputs([2, 3, 4]));
    expect(hops()).toEqual([]);
});

test("a host whose load fails is named, and the hosts after it still get the image", async () => {
    process.env.CHAIN_TEST_FAIL_LOAD = target(3).host;
    await expect(imageChainProvider.create!(inputs([2, 3, 4]))).rejects.toThrow(
        /image img:1 from node spark-1: not on node spark-3 after the chain copy[\s\S]*docker load failed on node spark-3/,
    );
    const want = fs.readFileSync(image(target(1)));
    expect(fs.readFileSync(image(target(2))).equals(want)).toBe(true);
    expect(fs.readFileSync(image(target(4))).equals(want)).toBe(true);
});

test("no image on the source: fails naming it before any stream", async () => {
    fs.rmSync(image(target(1)));
    await expect(imageChainProvider.create!(inputs([2]))).rejects.toThrow("image img:1: source image not present on node spark-1");
    expect(hops()).toEqual([]);
});

test("a host missing from known_hosts fails naming it before any stream", async () => {
    fs.writeFileSync(knownHosts, `${target(2).host} ${hostKey(2)}\n`);
    await expect(imageChainProvider.create!(inputs([2, 3]))).rejects.toThrow(
        `no known_hosts entry for node spark-3 (10.9.0.13) in ${knownHosts}`,
    );
    expect(fs.existsSync(image(target(2)))).toBe(false);
});

test("diff: a host without the image or a new member is a change; read re-inspects so a removed image shows up", async () => {
    const r = await imageChainProvider.create!(inputs([2, 3]));
    const d0 = await imageChainProvider.diff!("id", r.outs, inputs([2, 3]));
    expect(d0.changes).toBe(false);
    fs.rmSync(image(target(3)));
    const read = await imageChainProvider.read!("id", r.outs);
    const d1 = await imageChainProvider.diff!("id", read.props, inputs([2, 3]));
    expect(d1.changes).toBe(true);
    expect((read.props as { imageIds: Record<string, string> }).imageIds["spark-3"]).toBe("");
    expect((await imageChainProvider.diff!("id", r.outs, inputs([2, 3, 4]))).changes).toBe(true);
});

test("over the fabric: each host dials the next at its fabric IP, checking the key filed under its management address", async () => {
    const fabric = (i: number) => ({ ...member(i), peerHost: `10.8.0.${10 + i}` });
    await imageChainProvider.create!({ ref: "img:1", source: source(), members: [2, 3, 4].map(fabric) });
    const want = fs.readFileSync(image(target(1)));
    for (const i of [2, 3, 4]) expect(fs.readFileSync(image(target(i))).equals(want)).toBe(true);
    const ssh = hops();
    // the operator reaches the source at its management address; host to host goes over the fabric
    expect(ssh.map((l) => l.split(" agent=")[0])).toEqual([
        "operator -> 10.9.0.11",
        "10.9.0.11 -> 10.8.0.12 as 10.9.0.12",
        "10.9.0.12 -> 10.8.0.13 as 10.9.0.13",
        "10.9.0.13 -> 10.8.0.14 as 10.9.0.14",
    ]);
    // the only key each hop trusts is the operator's entry for the next node, whatever address it dials
    expect(ssh[2]).toContain(`kh=10.9.0.13 ${hostKey(3)}|`);
    expect(ssh.join("\n")).not.toContain("kh=10.8.");
});

describe("image identity across storage backends (a host marked as on the containerd image store reports a manifest digest as the ID)", () => {
    const onContainerd = (i: number) => fs.writeFileSync(path.join(hostDir(target(i)), "containerd"), "");
    const facts = (i: number) =>
        execFileSync("bash", ["-c", imageInspectScript(target(i), "img:1")], { env: { ...process.env } })
            .toString()
            .trim();

    test("the same image has another ID there, and is the same image: by content where a store is containerd's, by ID where both are classic", () => {
        fs.copyFileSync(image(target(1)), image(target(2)));
        fs.copyFileSync(image(target(1)), image(target(3)));
        onContainerd(3);
        const [classic, classic2, containerd] = [facts(1), facts(2), facts(3)];
        expect(classic).toMatch(/^sha256:[0-9a-f]{64} classic sha256:[0-9a-f]{64}$/);
        expect(containerd).toMatch(/^sha256:[0-9a-f]{64} containerd sha256:[0-9a-f]{64}$/);
        expect(containerd.split(" ")[0]).not.toBe(classic.split(" ")[0]);
        expect(containerd.split(" ")[2]).toBe(classic.split(" ")[2]);
        expect(sameImage(classic, classic2)).toBe(true);
        expect(sameImage(classic, containerd)).toBe(true);
        // two classic stores: the config digest decides, even where the content key agrees
        const [id, store, content] = classic.split(" ");
        const flip = (digest: string) => digest.slice(0, -1) + (digest.endsWith("0") ? "1" : "0");
        expect(sameImage(classic, [flip(id), store, content].join(" "))).toBe(false);
        expect(sameImage(classic, [id, store, flip(content)].join(" "))).toBe(false);
        expect(sameImage(containerd, [flip(containerd.split(" ")[0]), "containerd", content].join(" "))).toBe(true);
        expect(sameImage(classic, "")).toBe(false);
    });

    test("what ssh says on stderr is no part of the facts; a missing image is no facts, an engine that cannot answer is named", () => {
        const noisy = (i: number) =>
            spawnSync("bash", ["-c", imageInspectScript(target(i), "img:1")], {
                env: { ...process.env, CHAIN_TEST_SSH_NOISE: "1" },
                encoding: "utf8",
            });
        const r = noisy(1);
        expect(r.status).toBe(0);
        expect(r.stdout.trim()).toBe(facts(1));
        expect(r.stdout).not.toContain("ControlSocket");
        const absent = noisy(2);
        expect([absent.status, absent.stdout]).toEqual([0, ""]);
    });

    test("the chain skips a containerd-store host that holds the image under its own ID and fills one that lacks it", async () => {
        fs.copyFileSync(image(target(1)), image(target(2)));
        onContainerd(2);
        onContainerd(3);
        const r = await imageChainProvider.create!(inputs([2, 3, 4]));
        const outs = r.outs as { sourceId: string; imageIds: Record<string, string>; copied: string[]; sent: string };
        expect(outs.copied).toEqual(["spark-3", "spark-4"]);
        // what spark-3 and spark-4 hold decides what travels, whatever their stores: here they hold nothing
        expect(outs.sent).toBe("1 of 1 layers");
        expect(outs.imageIds["spark-3"]).not.toBe(outs.sourceId);
        expect(outs.imageIds["spark-4"]).toBe(outs.sourceId);
        // and the next run finds nothing to do: no re-send on every up
        expect((await imageChainProvider.diff!("id", r.outs, inputs([2, 3, 4]))).changes).toBe(false);
    });

    test("a containerd-store load that keeps an image it could not unpack: the image is removed and the copy fails naming the host", async () => {
        // Docker 28's `docker load` exits 0 there, and the image's facts are the source's: only its output says so
        process.env.CHAIN_TEST_UNPACK_ERROR = target(3).host;
        onContainerd(3);
        await expect(imageChainProvider.create!(inputs([2, 3]))).rejects.toThrow(
            /image img:1 from node spark-1: not on node spark-3 after the chain copy of 1 of 1 layers \(exit 1\):[\s\S]*\[spark-3\] Error unpacking image img:1: .*wrong diff id[\s\S]*\[spark-3\] removed img:1: Docker could not unpack it/,
        );
        expect(fs.existsSync(image(target(3)))).toBe(false);
        expect(fs.existsSync(image(target(2)))).toBe(true);
        // the per-host check (relay) does the same
        const ensure = imageEnsureScript({ kind: "host", node: "spark-1", target: target(1) }, target(3), "spark-3", "img:1");
        const relay = spawnSync("bash", ["-c", ensure], { env: { ...process.env }, encoding: "utf8" });
        expect(relay.status).toBe(1);
        expect(relay.stderr).toContain("image img:1 on node spark-3: Docker could not unpack the image it loaded (removed it again)");
        expect(fs.existsSync(image(target(3)))).toBe(false);
    });

    test("a host that holds another image after the copy is an error naming it, never a pass", async () => {
        process.env.CHAIN_TEST_ALTER_LOAD = target(3).host;
        await expect(imageChainProvider.create!(inputs([2, 3]))).rejects.toThrow(
            /image img:1 from node spark-1: node spark-3 holds sha256:\S+ classic sha256:\S+ after the chain copy, not the source's image sha256:/,
        );
    });

    test("the per-host check (relay and after the chain) takes the same image under another ID, and refuses another image", () => {
        onContainerd(2);
        const ensure = imageEnsureScript({ kind: "host", node: "spark-1", target: target(1) }, target(2), "spark-2", "img:1");
        const run = (env: Record<string, string> = {}) =>
            spawnSync("bash", ["-c", ensure], { env: { ...process.env, ...env }, encoding: "utf8" });
        const first = run({ EXPECTED_IMAGE: facts(1) });
        expect(first.status).toBe(0);
        expect(first.stderr).toContain("streaming img:1 from node spark-1 to node spark-2");
        const held = first.stdout.trim().split("\n").pop()!;
        expect(held).toBe(facts(2));
        expect(sameImage(held, facts(1))).toBe(true);
        // again: nothing streamed
        const again = run({ EXPECTED_IMAGE: facts(1) });
        expect([again.status, again.stderr]).toEqual([0, ""]);
        // another image expected (a source that moved on): named, never a pass
        const other = run({ EXPECTED_IMAGE: facts(1).replace(/sha256:[0-9a-f]{64}$/, `sha256:${"0".repeat(64)}`) });
        expect(other.status).toBe(1);
        expect(other.stderr).toMatch(/image img:1 on node spark-2: holds sha256:\S+ containerd sha256:\S+, not the source's image sha256:/);
    });
});

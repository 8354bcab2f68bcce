/**
 * The model chain's receiving end on a simulated host, over the real ssh: spark-2 runs the hop script's `load` (as
 * the host before it in a chain would have it run) on streams a hostile source could send. The two-stream race
 * (stream 0 carries `cfg -> outside`, stream 1 `cfg/authorized_keys`) and a link an earlier copy left in the model
 * directory: nothing lands outside it, and each refusal names the node, the stream and the member. And an honest copy
 * from spark-1 (two streams, a hard-linked file, awkward names) still lands whole. No Pulumi engine: the threat is
 * in the scripts. The same with a stand-in ssh in tests/unit/modelChainReceiver.test.ts. Run by
 * tests/integration/run.sh.
 */
import { spawn } from "child_process";
import * as fs from "fs";
import * as path from "path";
import { hopSsh } from "../../infra/builders/chain";
import { CHAIN_REFUSED, StreamShare, modelEnds } from "../../infra/builders/modelChain";
import { modelChainProvider } from "../../infra/providers/modelChain";
import { Member, hostileTar } from "../lib/hostileTar";
import { Hosts, stackConfig } from "./hosts";

const ROOT = path.join(__dirname, "..", "..");
const TESTBED = process.env.VCL_TESTBED_DIR ?? "/var/lib/vllm-cluster-testbed";
/** spark-2's own directory, as its sessions see it and as this machine does. */
const ON_HOST = path.posix.join(TESTBED, "own", "receiver-test");
const MODEL = path.posix.join(ON_HOST, "model");
const OUTSIDE = path.posix.join(ON_HOST, "outside");
const KEY = "ssh-ed25519 AAAA attacker\n";

const hosts = new Hosts(stackConfig(path.join(ROOT, "stacks", "Pulumi.local.yaml")));

/** One stream of the chain into spark-2 over ssh: the hop's `load`, with `members` as the stream. */
function receive(members: Member[], share: StreamShare): Promise<{ code: number | null; stderr: string }> {
    const cmd = hopSsh(hosts.target("spark-2"), modelEnds(MODEL, share), ["load", "spark-2"], []);
    return new Promise((resolve, reject) => {
        const p = spawn("bash", ["-c", cmd], { stdio: ["pipe", "ignore", "pipe"], env: process.env });
        let stderr = "";
        const timer = setTimeout(() => {
            p.kill("SIGKILL");
            reject(new Error("the receiver on spark-2 did not finish within 60 s"));
        }, 60_000);
        p.stderr.on("data", (b: Buffer) => (stderr += b.toString()));
        p.on("close", (code) => {
            clearTimeout(timer);
            resolve({ code, stderr });
        });
        p.stdin.end(hostileTar(members));
    });
}

/** What spark-2 holds under a directory, links not followed, as `path (type)`. */
async function listing(dir: string): Promise<string[]> {
    const out = await hosts.must("spark-2", [
        "sh",
        "-c",
        'test -d "$1" || exit 0; find "$1" -mindepth 1 -printf "%P (%y)\\n"',
        "list",
        dir,
    ]);
    return out.split("\n").filter(Boolean).sort();
}

beforeEach(async () => {
    for (const n of ["spark-1", "spark-2"]) await hosts.must(n, ["sh", "-c", 'rm -rf "$1" && mkdir -p "$2"', "reset", ON_HOST, OUTSIDE]);
});
afterAll(() => {
    for (const n of ["spark-1", "spark-2"])
        fs.rmSync(path.join(TESTBED, "hosts", n, "own", "receiver-test"), { recursive: true, force: true });
});

describe("the model chain's receiver on spark-2, over ssh", () => {
    test("the two-stream race, one after the other and at once: the link is refused, nothing lands outside", async () => {
        const link: Member[] = [{ name: "cfg", type: "symlink", target: OUTSIDE }];
        const file: Member[] = [{ name: "cfg/authorized_keys", type: "file", data: KEY }];
        const first = await receive(link, { index: 0, count: 2 });
        expect(first.code).toBe(CHAIN_REFUSED);
        expect(first.stderr).toContain(
            `[spark-2] model chain: node spark-2, stream 1 of 2: member cfg -> ${OUTSIDE} refused: a symbolic link: only regular files are unpacked`,
        );
        expect((await receive(file, { index: 1, count: 2 })).code).toBe(0);
        expect(await listing(OUTSIDE)).toEqual([]);
        expect(await listing(MODEL)).toEqual(["cfg (d)", "cfg/authorized_keys (f)"]);

        await hosts.must("spark-2", ["rm", "-rf", MODEL]);
        const both = await Promise.all([receive(link, { index: 0, count: 2 }), receive(file, { index: 1, count: 2 })]);
        expect(both.map((r) => r.code)).toEqual([CHAIN_REFUSED, 0]);
        expect(await listing(OUTSIDE)).toEqual([]);
        expect(await listing(MODEL)).toEqual(["cfg (d)", "cfg/authorized_keys (f)"]);
    }, 180_000);

    test("a link an earlier copy left on a member's path is refused, naming it and where it leads; nothing goes through it", async () => {
        await hosts.must("spark-2", ["sh", "-c", 'mkdir -p "$1" && ln -s "$2" "$1/cfg"', "plant", MODEL, OUTSIDE]);
        const r = await receive(
            [
                { name: "config.json", type: "file", data: "{}" },
                { name: "cfg/authorized_keys", type: "file", data: KEY },
            ],
            { index: 1, count: 2 },
        );
        expect(r.code).toBe(CHAIN_REFUSED);
        expect(r.stderr).toContain(
            `model chain: node spark-2, stream 2 of 2: member cfg/authorized_keys refused: cfg is already in the model directory ` +
                `as a symbolic link (to ${OUTSIDE}), which it would be written through; remove it (${MODEL}/cfg) and copy again`,
        );
        expect(await listing(OUTSIDE)).toEqual([]);
        expect(await listing(MODEL)).toEqual(["cfg (l)", "config.json (f)"]);
    }, 120_000);

    test("an honest chain copy, spark-1 to spark-2 in two streams (a hard-linked file, names with spaces and a leading dash), lands whole", async () => {
        await hosts.must("spark-1", [
            "sh",
            "-c",
            'mkdir -p "$1/sub dir" && head -c 3000000 /dev/urandom >"$1/model.safetensors" && echo "{}" >"$1/config.json" && ' +
                'ln "$1/config.json" "$1/sub dir/same.json" && printf x >"$1/-x odd"',
            "make",
            MODEL,
        ]);
        const member = (node: string) => ({ node, target: hosts.target(node) });
        const r = await modelChainProvider.create!({
            hostPath: MODEL,
            source: member("spark-1"),
            members: [member("spark-2")],
            streams: 2,
        });
        const outs = r.outs as { digest: string; digests: Record<string, string>; files: number; copied: string[] };
        expect(outs.files).toBe(4);
        expect(outs.copied).toEqual(["spark-2"]);
        expect(outs.digests["spark-2"]).toBe(outs.digest);
        expect(await listing(MODEL)).toEqual([
            "-x odd (f)",
            "config.json (f)",
            "model.safetensors (f)",
            "sub dir (d)",
            "sub dir/same.json (f)",
        ]);
    }, 120_000);
});

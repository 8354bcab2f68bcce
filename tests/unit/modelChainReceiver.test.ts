/**
 * The model chain's receiving end (model_ends.bash load, model_lib.bash land_member) fed the streams a hostile
 * source could send, through the real hop script and the stand-in ssh of tests/unit/fixtures/chain-bin (the remote
 * command runs here, with the member host's own directory as /dev/fd/9). It unpacks regular files only, under the
 * model directory, never through a link; everything else is refused naming the node, the stream and the member,
 * and the chain exits CHAIN_REFUSED. The same streams on a simulated host over real ssh:
 * tests/integration/chainReceiver.test.ts.
 */
import { execFileSync, spawn } from "child_process";
import * as fs from "fs";
import * as os from "os";
import * as path from "path";
import { hopSsh } from "../../infra/builders/chain";
import { scriptFile } from "../../infra/builders/remoteStep";
import { CHAIN_REFUSED, StreamShare, modelEnds } from "../../infra/builders/modelChain";
import type { SshTarget } from "../../infra/builders/ssh";
import { modelChainProvider } from "../../infra/providers/modelChain";
import { Member, hostileTar } from "../lib/hostileTar";
import { generatedHostKeys } from "./hostKeys";

const BIN = path.join(__dirname, "fixtures", "chain-bin");
const HOST_PATH = "/dev/fd/9/model";
let dir: string;
let outside: string;
const savedPath = process.env.PATH;

const target = (i: number): SshTarget => ({
    user: "root",
    host: `10.9.0.${10 + i}`,
    port: 22,
    privateKeyPath: path.join(dir, "id"),
    knownHostsFile: path.join(dir, "known_hosts"),
});
const hostDir = (i: number) => path.join(dir, "hosts", target(i).host);
const modelDir = (i: number) => path.join(hostDir(i), "model");

beforeEach(() => {
    dir = fs.mkdtempSync(path.join(os.tmpdir(), "vcl-receiver-"));
    outside = path.join(dir, "outside");
    fs.mkdirSync(outside);
    for (const i of [1, 2]) fs.mkdirSync(hostDir(i), { recursive: true });
    process.env.PATH = `${BIN}:${savedPath}`;
    process.env.CHAIN_TEST_DIR = dir;
    process.env.XDG_CACHE_HOME = path.join(dir, "cache");
});
afterEach(() => {
    process.env.PATH = savedPath;
    delete process.env.CHAIN_TEST_DIR;
    delete process.env.XDG_CACHE_HOME;
    fs.rmSync(dir, { recursive: true, force: true });
});

interface Run {
    code: number | null;
    stderr: string;
}

/** One stream of the chain into spark-2, as the host before it sends it: the hop's `load` with `members` on stdin. */
function receive(members: Member[], share: StreamShare): Promise<Run> {
    const cmd = hopSsh(target(2), modelEnds(HOST_PATH, share), ["load", "spark-2"], []);
    return new Promise((resolve) => {
        const p = spawn("bash", ["-c", cmd], { stdio: ["pipe", "ignore", "pipe"], env: process.env });
        let stderr = "";
        p.stderr.on("data", (b) => (stderr += b));
        p.on("close", (code) => resolve({ code, stderr }));
        p.stdin.end(hostileTar(members));
    });
}

/** Every file under `root`, links not followed, as `path (type)`. */
function listing(root: string): string[] {
    if (!fs.existsSync(root)) return [];
    return execFileSync("find", [root, "-mindepth", "1", "-printf", "%P (%y)\\n"], { encoding: "utf8", env: process.env })
        .split("\n")
        .filter(Boolean)
        .sort();
}

const SHARE0 = { index: 0, count: 2 };
/** Where an absolute member would land if it were taken as it is. */
const ABSOLUTE = path.join(os.tmpdir(), "vcl-receiver-absolute-member");
const SHARE1 = { index: 1, count: 2 };
const KEY = "ssh-ed25519 AAAA attacker\n";

describe("the two-stream race: stream 0 carries cfg -> /outside, stream 1 cfg/authorized_keys", () => {
    test("one after the other: the link is refused, the key lands in a real cfg/ under the model directory, nothing outside", async () => {
        const first = await receive([{ name: "cfg", type: "symlink", target: outside }], SHARE0);
        expect(first.code).toBe(CHAIN_REFUSED);
        expect(first.stderr).toContain(
            `[spark-2] model chain: node spark-2, stream 1 of 2: member cfg -> ${outside} refused: a symbolic link: only regular files are unpacked`,
        );
        const second = await receive([{ name: "cfg/authorized_keys", type: "file", data: KEY }], SHARE1);
        expect(second.code).toBe(0);
        expect(listing(outside)).toEqual([]);
        expect(listing(modelDir(2))).toEqual(["cfg (d)", "cfg/authorized_keys (f)"]);
    });

    test("at once: the same, whichever lands first", async () => {
        const [a, b] = await Promise.all([
            receive([{ name: "cfg", type: "symlink", target: outside }], SHARE0),
            receive([{ name: "cfg/authorized_keys", type: "file", data: KEY }], SHARE1),
        ]);
        expect([a.code, b.code]).toEqual([CHAIN_REFUSED, 0]);
        expect(listing(outside)).toEqual([]);
        expect(fs.lstatSync(path.join(modelDir(2), "cfg")).isDirectory()).toBe(true);
    });
});

describe("a link already in the model directory", () => {
    test("on a member's path (left by an earlier copy): refused naming it and where it leads; nothing written through it", async () => {
        fs.mkdirSync(modelDir(2));
        fs.symlinkSync(outside, path.join(modelDir(2), "cfg"));
        const r = await receive(
            [
                { name: "config.json", type: "file", data: "{}" },
                { name: "cfg/authorized_keys", type: "file", data: KEY },
            ],
            SHARE1,
        );
        expect(r.code).toBe(CHAIN_REFUSED);
        expect(r.stderr).toContain(
            `model chain: node spark-2, stream 2 of 2: member cfg/authorized_keys refused: cfg is already in the model directory as a ` +
                `symbolic link (to ${outside}), which it would be written through; remove it (`,
        );
        expect(listing(outside)).toEqual([]);
        // the rest of the stream still lands
        expect(fs.readFileSync(path.join(modelDir(2), "config.json"), "utf8")).toBe("{}");
    });

    test("at a member's own name: the link is replaced by the file, its target untouched", async () => {
        fs.mkdirSync(modelDir(2));
        fs.writeFileSync(path.join(outside, "passwd"), "root:x:0:0\n");
        fs.symlinkSync(path.join(outside, "passwd"), path.join(modelDir(2), "config.json"));
        const r = await receive([{ name: "config.json", type: "file", data: '{"model_type": "qwen2"}' }], SHARE0);
        expect(r.code).toBe(0);
        expect(fs.readFileSync(path.join(outside, "passwd"), "utf8")).toBe("root:x:0:0\n");
        expect(fs.lstatSync(path.join(modelDir(2), "config.json")).isFile()).toBe(true);
    });
});

describe("members that are not regular files under the model directory", () => {
    const cases: [string, Member, string][] = [
        ["an absolute name", { name: ABSOLUTE, type: "file", data: "x" }, "an absolute name: it would land outside the model directory"],
        ["a leading ..", { name: "../../escape", type: "file", data: "x" }, "a name with a '..', '.' or empty part"],
        ["a .. inside", { name: "a/../../escape", type: "file", data: "x" }, "a name with a '..', '.' or empty part"],
        ["a hard link", { name: "hl", type: "hardlink", target: "config.json" }, "a hard link: only regular files are unpacked"],
        ["a device", { name: "null", type: "chardev" }, "not a regular file (type c): only regular files are unpacked"],
    ];
    test.each(cases)("%s: refused naming node, stream and member; nothing lands outside", async (_what, bad, why) => {
        const r = await receive([{ name: "config.json", type: "file", data: "{}" }, bad], SHARE0);
        expect(r.code).toBe(CHAIN_REFUSED);
        expect(r.stderr).toMatch(
            new RegExp(
                `model chain: node spark-2, stream 1 of 2: member \\S*${path.basename(bad.name)}\\S* .*refused: ${why.replace(/[.()]/g, "\\$&")}`,
            ),
        );
        expect(listing(outside)).toEqual([]);
        expect(fs.existsSync(ABSOLUTE)).toBe(false);
        expect(listing(dir).filter((f) => /escape|abs|^hosts\/[^/]+\/(hl|null)/.test(f))).toEqual([]);
        expect(listing(modelDir(2))).toEqual(["config.json (f)"]);
    });
});

test("a refused stream fails the copy whatever the manifests say afterwards, naming the node, the stream and the member", async () => {
    // the source: one file; the member already holds it, and a link inside its model directory on the way of another
    const src = modelDir(1);
    fs.mkdirSync(path.join(src, "tokenizer"), { recursive: true });
    fs.writeFileSync(path.join(src, "tokenizer", "vocab.txt"), "a\n");
    fs.mkdirSync(path.join(modelDir(2), "sub"), { recursive: true });
    fs.writeFileSync(path.join(modelDir(2), "sub", "vocab.txt"), "old\n");
    fs.symlinkSync("sub", path.join(modelDir(2), "tokenizer"));
    fs.writeFileSync(
        path.join(dir, "known_hosts"),
        [1, 2].map((i) => `${target(i).host} ${generatedHostKeys(2)[i - 1]}`).join("\n") + "\n",
    );
    execFileSync("ssh-keygen", ["-q", "-t", "ed25519", "-N", "", "-f", path.join(dir, "id")]);
    const member = (i: number) => ({ node: `spark-${i}`, target: target(i) });
    await expect(modelChainProvider.create!({ hostPath: HOST_PATH, source: member(1), members: [member(2)], streams: 1 })).rejects.toThrow(
        /model directory \/dev\/fd\/9\/model from node spark-1: the chain copy was refused \(exit 3\):[\s\S]*node spark-2, stream 1 of 1: member tokenizer\/vocab.txt refused: tokenizer is already in the model directory as a symbolic link \(to sub\)/,
    );
    expect(fs.readFileSync(path.join(modelDir(2), "sub", "vocab.txt"), "utf8")).toBe("old\n");
});

test("an honest source with two names for one file (a hard link) sends both as regular files, which land", async () => {
    fs.mkdirSync(path.join(modelDir(1), "sub"), { recursive: true });
    fs.writeFileSync(path.join(modelDir(1), "config.json"), "{}\n");
    fs.linkSync(path.join(modelDir(1), "config.json"), path.join(modelDir(1), "sub", "same.json"));
    execFileSync("ssh-keygen", ["-q", "-t", "ed25519", "-N", "", "-f", path.join(dir, "id")]);
    fs.writeFileSync(
        path.join(dir, "known_hosts"),
        [1, 2].map((i) => `${target(i).host} ${generatedHostKeys(2)[i - 1]}`).join("\n") + "\n",
    );
    const member = (i: number) => ({ node: `spark-${i}`, target: target(i) });
    const r = await modelChainProvider.create!({ hostPath: HOST_PATH, source: member(1), members: [member(2)], streams: 1 });
    expect((r.outs as { copied: string[] }).copied).toEqual(["spark-2"]);
    expect(listing(modelDir(2))).toEqual(["config.json (f)", "sub (d)", "sub/same.json (f)"]);
});

test("the program's CHAIN_REFUSED is the scripts' REFUSED", () => {
    expect(scriptFile("model_lib.bash").text).toContain(`export REFUSED=${CHAIN_REFUSED}\n`);
});

/**
 * The model chain with its real scripts run by bash, sha256sum, find and tar, against the stand-in `ssh` in
 * tests/unit/fixtures/chain-bin: it runs the remote command here as the named host, with that host's directory as
 * /dev/fd/9, so the model directory /dev/fd/9/hub/snapshots/rev is a different directory on each host. The real
 * ssh-agent and ssh-add run. The source's model is laid out as a Hugging Face cache: the snapshot's files are links
 * into blobs/, outside the model directory.
 */
import { createHash } from "crypto";
import { execFileSync, spawnSync } from "child_process";
import * as fs from "fs";
import * as os from "os";
import * as path from "path";
import { ChainHop, HOP_SCRIPT } from "../../infra/builders/chain";
import { localStepArgv, scriptFile } from "../../infra/builders/remoteStep";
import {
    ALL_FILES,
    FILE_LIST_MAX_CHARS,
    FILE_STAMP,
    fileBatches,
    filesToSend,
    manifestDifferences,
    modelChainCopyScript,
    modelEnds,
    modelManifestStep,
    parseManifest,
} from "../../infra/builders/modelChain";
import type { SshTarget } from "../../infra/builders/ssh";
import { modelChainProvider } from "../../infra/providers/modelChain";
import { generatedHostKeys } from "./hostKeys";

const BIN = path.join(__dirname, "fixtures", "chain-bin");
const HOST_PATH = "/dev/fd/9/hub/snapshots/rev";
/** Written as files on a member before a run: a file still this old afterwards was not sent to it. */
const OLD = new Date("2001-01-01T00:00:00Z");
let dir: string;
let key: string;
const savedPath = process.env.PATH;

function target(i: number): SshTarget {
    return { user: "root", host: `10.9.0.${10 + i}`, port: 22, privateKeyPath: key, knownHostsFile: path.join(dir, "known_hosts") };
}
const node = (i: number) => `spark-${i}`;
const member = (i: number) => ({ node: node(i), target: target(i) });
const hostDir = (i: number) => path.join(dir, "hosts", target(i).host);
/** The model directory of host i, as the test sees it. */
const modelDir = (i: number) => path.join(hostDir(i), "hub", "snapshots", "rev");
/** Host i's public key: real keys, since ssh-add looks them up to bind the agent's chain constraints. */
const HOST_KEYS = generatedHostKeys(4);
const hostKey = (i: number) => HOST_KEYS[i - 1];
const sha256 = (b: Buffer | string) => createHash("sha256").update(b).digest("hex");

/** The chain's connections (ssh -A), "<from> -> <to>". */
function hops(): string[] {
    const f = path.join(dir, "ssh.log");
    return fs.existsSync(f)
        ? fs
              .readFileSync(f, "utf8")
              .trim()
              .split("\n")
              .map((l) => l.split(" agent=")[0])
        : [];
}

/** Every file under `root` (links followed) by relative path: its sha256. */
function tree(root: string): Record<string, string> {
    const out: Record<string, string> = {};
    const walk = (rel: string) => {
        for (const name of fs.readdirSync(path.join(root, rel))) {
            const p = path.join(rel, name);
            if (fs.statSync(path.join(root, p)).isDirectory()) walk(p);
            else out[p] = sha256(fs.readFileSync(path.join(root, p)));
        }
    };
    walk("");
    return out;
}

/** Sets every file under `root` to the OLD time. */
function ageFiles(root: string): void {
    for (const p of Object.keys(tree(root))) fs.utimesSync(path.join(root, p), OLD, OLD);
}
const isOld = (i: number, p: string) => fs.statSync(path.join(modelDir(i), p)).mtime.getTime() === OLD.getTime();

beforeEach(() => {
    dir = fs.mkdtempSync(path.join(os.tmpdir(), "vcl-model-chain-"));
    key = path.join(dir, "id_ed25519");
    execFileSync("ssh-keygen", ["-q", "-t", "ed25519", "-N", "", "-f", key]);
    fs.writeFileSync(path.join(dir, "known_hosts"), [1, 2, 3, 4].map((i) => `${target(i).host} ${hostKey(i)}`).join("\n") + "\n");
    for (const i of [1, 2, 3, 4]) fs.mkdirSync(hostDir(i), { recursive: true });
    // the source: the weights (3 MiB, larger than a pipe) and the config behind links into blobs/, as in an HF cache
    const blobs = path.join(hostDir(1), "hub", "blobs");
    fs.mkdirSync(blobs, { recursive: true });
    fs.writeFileSync(path.join(blobs, "b1"), Buffer.alloc(3 << 20, 7));
    fs.writeFileSync(path.join(blobs, "b2"), '{"model_type": "qwen2"}\n');
    fs.mkdirSync(path.join(modelDir(1), "tokenizer"), { recursive: true });
    fs.symlinkSync("../../blobs/b1", path.join(modelDir(1), "model.safetensors"));
    fs.symlinkSync("../../blobs/b2", path.join(modelDir(1), "config.json"));
    fs.writeFileSync(path.join(modelDir(1), "tokenizer", "vocab.txt"), "a\nb\n");
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

const inputs = (members: number[]) => ({ hostPath: HOST_PATH, source: member(1), members: members.map(member) });
type Outs = { digest: string; files: number; bytes: number; digests: Record<string, string>; copied: string[] };

test("the scripts are valid bash; the file list travels base64 in the command line", () => {
    const h = (i: number): ChainHop => ({ ...member(i), knownHosts: [`${target(i).host} ${hostKey(i)}`] });
    execFileSync("bash", ["-n", "-c", localStepArgv(modelManifestStep(node(1), HOST_PATH))[2]]);
    execFileSync("bash", ["-n", "-c", modelEnds(HOST_PATH).script]);
    const script = modelChainCopyScript(target(1), HOST_PATH, ["config.json", "a b"], [h(2), h(3)], target(2));
    execFileSync("bash", ["-n", "-c", script]);
    expect(script).toContain(Buffer.from("config.json\0a b\0").toString("base64"));
    // the argument: this stream's share (stream 0 of 1 by default), then the directory
    expect(modelEnds(HOST_PATH)).toEqual({
        script: expect.stringContaining('tar -C "$arg" -chf - --hard-dereference --null -T') as string,
        arg: `0/1\n${HOST_PATH}`,
    });
    expect(modelEnds(HOST_PATH, { index: 2, count: 4 }).arg).toBe(`2/4\n${HOST_PATH}`);
    // the stamps the landing records are made with are the ones the tests (and the program's docs) name
    expect(scriptFile("model_lib.bash").text).toContain(`export FILE_STAMP='${FILE_STAMP}'`);
});

test("create copies source -> spark-2 -> spark-3 -> spark-4: the same checksums everywhere, links arrive as files", async () => {
    const r = await modelChainProvider.create!(inputs([2, 3, 4]));
    const want = tree(modelDir(1));
    expect(Object.keys(want).sort()).toEqual(["config.json", "model.safetensors", "tokenizer/vocab.txt"]);
    for (const i of [2, 3, 4]) {
        expect(tree(modelDir(i))).toEqual(want);
        // dereferenced: a regular file with the blob's content, and no blobs/ on the member
        expect(fs.lstatSync(path.join(modelDir(i), "model.safetensors")).isFile()).toBe(true);
        expect(fs.existsSync(path.join(hostDir(i), "hub", "blobs"))).toBe(false);
    }
    // one connection from the operator (to the source), then host to host: no model byte through the operator
    expect(hops()).toEqual(["operator -> 10.9.0.11", "10.9.0.11 -> 10.9.0.12", "10.9.0.12 -> 10.9.0.13", "10.9.0.13 -> 10.9.0.14"]);
    const outs = r.outs as Outs;
    // the digest is sha256 of `sha256  path` lines sorted by path (C locale)
    const manifest = Object.keys(want)
        .sort()
        .map((p) => `${want[p]}  ${p}\n`)
        .join("");
    expect(outs.digest).toBe(`sha256:${sha256(manifest)}`);
    expect(outs).toMatchObject({ files: 3, bytes: (3 << 20) + 24 + 4, copied: ["spark-2", "spark-3", "spark-4"] });
    expect(outs.digests).toEqual({ "spark-2": outs.digest, "spark-3": outs.digest, "spark-4": outs.digest });
    // the manifests after the copy took up the hashes the members made as the files landed, and removed them
    expect(fs.readdirSync(landedRoot())).toEqual([]);
});

test("names with a line break or a leading dash arrive intact", async () => {
    fs.writeFileSync(path.join(modelDir(1), "odd\nname"), "x");
    fs.writeFileSync(path.join(modelDir(1), "-C"), "y");
    await modelChainProvider.create!(inputs([2]));
    expect(tree(modelDir(2))).toEqual(tree(modelDir(1)));
});

test("a member that matches is left out of the chain and sent nothing; nothing to copy opens no stream", async () => {
    fs.cpSync(modelDir(1), modelDir(3), { recursive: true, dereference: true });
    ageFiles(modelDir(3));
    const r = await modelChainProvider.create!(inputs([2, 3, 4]));
    expect(hops()).toEqual(["operator -> 10.9.0.11", "10.9.0.11 -> 10.9.0.12", "10.9.0.12 -> 10.9.0.14"]);
    expect((r.outs as Outs).copied).toEqual(["spark-2", "spark-4"]);
    expect(Object.keys(tree(modelDir(3))).every((p) => isOld(3, p))).toBe(true);
    fs.rmSync(path.join(dir, "ssh.log"));
    const u = await modelChainProvider.update!("id", r.outs, inputs([2, 3, 4]));
    expect(hops()).toEqual([]);
    expect((u.outs as Outs).copied).toEqual([]);
});

test("resumable: a member with one corrupted file gets that file only, and the others nothing", async () => {
    const r = await modelChainProvider.create!(inputs([2, 3]));
    fs.writeFileSync(path.join(modelDir(3), "model.safetensors"), Buffer.alloc(3 << 20, 8));
    ageFiles(modelDir(2));
    ageFiles(modelDir(3));
    fs.rmSync(path.join(dir, "ssh.log"));
    const u = await modelChainProvider.update!("id", r.outs, inputs([2, 3]));
    expect(hops()).toEqual(["operator -> 10.9.0.11", "10.9.0.11 -> 10.9.0.13"]);
    expect((u.outs as Outs).copied).toEqual(["spark-3"]);
    expect(tree(modelDir(3))).toEqual(tree(modelDir(1)));
    // tar sets the source's time on what it unpacks: only the corrupted file was sent
    expect(isOld(3, "model.safetensors")).toBe(false);
    expect(isOld(3, "config.json") && isOld(3, "tokenizer/vocab.txt")).toBe(true);
    expect(Object.keys(tree(modelDir(2))).every((p) => isOld(2, p))).toBe(true);
});

/** Where the members keep the hashes of the files they unpacked (every host shares the test's cache). */
const landedRoot = () => path.join(dir, "cache", "vllm-cluster", "landed");
/** The directory of those hashes for model directory `m`. */
function landedDir(m: string): string {
    const st = fs.statSync(m);
    return path.join(landedRoot(), `${st.dev}-${st.ino}`);
}
/** The records there, every stream's (one subdirectory each): stamp -> sha256sum line. */
function landedRecords(m: string): Record<string, string> {
    const d = landedDir(m);
    const out: Record<string, string> = {};
    for (const s of fs.existsSync(d) ? fs.readdirSync(d) : []) {
        for (const f of fs.readdirSync(path.join(d, s))) {
            const [stamp, line] = fs.readFileSync(path.join(d, s, f), "utf8").split("\0");
            out[stamp] = line;
        }
    }
    return out;
}
/** A file's stamp as the scripts take it (find -L run in the model directory). */
const stampOf = (m: string, p: string) =>
    execFileSync("find", ["-L", `./${p}`, "-maxdepth", "0", "-type", "f", "-printf", FILE_STAMP], { cwd: m, encoding: "utf8" });

test("each member hashes the files it unpacks as they land: one record per file, with its stamp and its sha256sum line", () => {
    const h = (i: number): ChainHop => ({ ...member(i), knownHosts: [`${target(i).host} ${hostKey(i)}`] });
    const files = ["config.json", "model.safetensors", "tokenizer/vocab.txt"];
    execFileSync("bash", ["-c", modelChainCopyScript(target(1), HOST_PATH, files, [h(2), h(3)], target(2))], { env: process.env });
    const want = tree(modelDir(1));
    for (const i of [2, 3]) {
        // the last file too: the list of names ends when tar does
        expect(landedRecords(modelDir(i))).toEqual(Object.fromEntries(files.map((p) => [stampOf(modelDir(i), p), `${want[p]}  ${p}`])));
        expect(fs.statSync(landedDir(modelDir(i))).mode & 0o777).toBe(0o700);
    }
});

test("the manifest after a copy takes a landed hash only while the file's stamp is unchanged, then drops the records", () => {
    const m = modelDir(2);
    fs.cpSync(modelDir(1), m, { recursive: true, dereference: true });
    const real = tree(m);
    const forged = "f".repeat(64);
    const forge = () => {
        fs.mkdirSync(path.join(landedDir(m), "s0"), { recursive: true });
        fs.writeFileSync(path.join(landedDir(m), "s0", "r.1"), `${stampOf(m, "config.json")}\0${forged}  config.json\0`);
    };
    const manifest = (landed: boolean) =>
        parseManifest(
            execFileSync("bash", localStepArgv(modelManifestStep(node(2), m, landed)).slice(1), { encoding: "utf8", env: process.env }),
        ).files;
    forge();
    // an ordinary manifest (before a copy, a refresh) hashes every file and leaves the records alone
    expect(manifest(false).get("config.json")).toBe(real["config.json"]);
    expect(Object.keys(landedRecords(m))).toHaveLength(1);
    // after a copy: the record stands for the file it was made from (a forged sum shows it was taken, not recomputed)
    const after = manifest(true);
    expect(after.get("config.json")).toBe(forged);
    expect(after.get("model.safetensors")).toBe(real["model.safetensors"]);
    expect(after.size).toBe(3);
    expect(fs.existsSync(landedDir(m))).toBe(false);
    // a file touched since it was hashed (here only its times) has another stamp: it is hashed again
    forge();
    fs.utimesSync(path.join(m, "config.json"), OLD, OLD);
    expect(manifest(true).get("config.json")).toBe(real["config.json"]);
});

test("a member without a writable cache still gets the model; the check after the copy hashes every file", async () => {
    fs.writeFileSync(path.join(dir, "not-a-dir"), "");
    process.env.XDG_CACHE_HOME = path.join(dir, "not-a-dir", "cache");
    const r = await modelChainProvider.create!(inputs([2]));
    expect((r.outs as Outs).copied).toEqual(["spark-2"]);
    expect(tree(modelDir(2))).toEqual(tree(modelDir(1)));
});

test("the files to send: those some member lacks or holds with other content, once, in path order", () => {
    const m = (lines: string[]) => parseManifest(`present 0\n${lines.map((l) => `${l}\n`).join("")}`);
    const [a, b, c] = ["a".repeat(64), "b".repeat(64), "c".repeat(64)];
    const source = m([`${a}  x`, `${b}  y/z`, `${c}  -`]);
    const ok = m([`${a}  x`, `${b}  y/z`, `${c}  -`, `${a}  extra`]);
    const wrong = m([`${a}  x`, `${a}  y/z`]);
    expect(filesToSend(source, [ok])).toEqual([]);
    // the hashers finish in any order; the manifest is in byte order of the paths, so equal content reads equal
    expect(filesToSend(source, [ok, wrong])).toEqual(["-", "y/z"]);
    expect(m([`${c}  -`, `${b}  y/z`, `${a}  x`]).text).toBe(source.text);
    expect(manifestDifferences(source, wrong)).toBe("- (missing), y/z (other content)");
    expect(manifestDifferences(source, ok)).toBe("extra (not on the source, left in place)");
    // sha256sum escapes a name with a line break or backslash and marks the line with a leading backslash
    expect([...m([`\\${a}  one\\ntwo\\\\three`]).files.keys()]).toEqual(["one\ntwo\\three"]);
    const many = Array.from({ length: 5000 }, (_, i) => `shard-${String(i).padStart(5, "0")}.bin`);
    const batches = fileBatches(many);
    expect(batches.length).toBeGreaterThan(1);
    expect(batches.flat()).toEqual(many);
    for (const batch of batches) {
        expect(Buffer.from(batch.map((f) => `${f}\0`).join("")).toString("base64").length).toBeLessThanOrEqual(FILE_LIST_MAX_CHARS);
    }
});

test("the longest hop command (a full file list, the hop and its ends) stays well under one argument's 128 KiB", () => {
    const h = (i: number): ChainHop => ({ ...member(i), knownHosts: [`${target(i).host} ${hostKey(i)}`] });
    const many = Array.from({ length: 5000 }, (_, i) => `model-${String(i).padStart(5, "0")}-of-05000.safetensors`);
    const [batch] = fileBatches(many);
    const ssh = modelChainCopyScript(target(1), HOST_PATH, batch, [h(2), h(3), h(4)], target(2))
        .split("\n")
        .pop()!;
    // an ssh that prints the length of the remote command it was given (its last argument), what sshd hands to a shell
    const r = spawnSync("sh", ["-c", `ssh() { for a; do last=$a; done; printf %s "\${#last}"; }; ${ssh}`], { encoding: "utf8" });
    const length = Number(r.stdout);
    expect(length).toBeGreaterThan(FILE_LIST_MAX_CHARS * 0.95);
    expect(length).toBeLessThan(128 * 1024 - 16 * 1024);
});

test("a member that cannot unpack is named; the members after it still get the model", async () => {
    fs.mkdirSync(path.dirname(modelDir(3)), { recursive: true });
    fs.writeFileSync(modelDir(3), "not a directory");
    await expect(modelChainProvider.create!(inputs([2, 3, 4]))).rejects.toThrow(
        new RegExp(
            `model directory ${HOST_PATH} from node spark-1 differs after the chain copy on node spark-3: ` +
                `config.json \\(missing\\), model.safetensors \\(missing\\), tokenizer/vocab.txt \\(missing\\) ` +
                `\\(chain copy exit 1\\):[\\s\\S]*unpacking the model failed on node spark-3`,
        ),
    );
    expect(tree(modelDir(2))).toEqual(tree(modelDir(1)));
    expect(tree(modelDir(4))).toEqual(tree(modelDir(1)));
});

test("files a member holds that the source does not are left in place and named", async () => {
    fs.cpSync(modelDir(1), modelDir(2), { recursive: true, dereference: true });
    fs.writeFileSync(path.join(modelDir(2), "stray.safetensors"), "old shard");
    await expect(modelChainProvider.create!(inputs([2]))).rejects.toThrow(
        `model directory ${HOST_PATH} from node spark-1 differs after the chain copy on node spark-2: ` +
            "stray.safetensors (not on the source, left in place)",
    );
    expect(hops()).toEqual([]);
    expect(fs.readFileSync(path.join(modelDir(2), "stray.safetensors"), "utf8")).toBe("old shard");
});

/** Puts a sha256sum on PATH that runs `first` (bash) before hashing when it runs on the source host. */
function onSourceBeforeHashing(first: string[]): void {
    const bin = path.join(dir, "slow-bin");
    fs.mkdirSync(bin);
    const wrapper = ["#!/usr/bin/env bash", 'if [ "${CHAIN_HOST:-}" = 10.9.0.11 ]; then', ...first, "fi", 'exec /usr/bin/sha256sum "$@"'];
    fs.writeFileSync(path.join(bin, "sha256sum"), wrapper.join("\n") + "\n", { mode: 0o755 });
    process.env.PATH = `${bin}:${process.env.PATH}`;
}

test("when no member holds a file, the stream starts while the source is still hashing", async () => {
    // the source's hashing waits (up to 5 s) for the source's connection on to spark-2
    onSourceBeforeHashing([
        "seen=serial",
        'for _ in $(seq 50); do grep -qs "10.9.0.11 -> 10.9.0.12" "$CHAIN_TEST_DIR/ssh.log" && { seen=overlapped; break; }; sleep 0.1; done',
        'echo "$seen" >>"$CHAIN_TEST_DIR/hash.log"',
    ]);
    const r = await modelChainProvider.create!(inputs([2, 3]));
    expect((r.outs as Outs).copied).toEqual(["spark-2", "spark-3"]);
    expect(tree(modelDir(3))).toEqual(tree(modelDir(1)));
    expect(new Set(fs.readFileSync(path.join(dir, "hash.log"), "utf8").trim().split("\n"))).toEqual(new Set(["overlapped"]));
    // a member holding a file waits for the hashes, which say what it lacks (see "resumable" above)
});

test("a stream started early that fails while the source still hashes: the error names why, after the hashing", async () => {
    onSourceBeforeHashing(["sleep 1"]);
    fs.writeFileSync(path.join(dir, "known_hosts"), `${target(1).host} ${hostKey(1)}\n`);
    await expect(modelChainProvider.create!(inputs([2]))).rejects.toThrow("no known_hosts entry for node spark-2 (10.9.0.12)");
    expect(fs.existsSync(modelDir(2))).toBe(false);
});

test("a broken link on the source fails naming it, before any stream to a member", async () => {
    fs.symlinkSync("../../blobs/gone", path.join(modelDir(1), "tokenizer", "merges.txt"));
    await expect(modelChainProvider.create!(inputs([2]))).rejects.toThrow(
        `model manifest of ${HOST_PATH} on node spark-1 failed (exit 3):\n` +
            `broken symbolic link ${HOST_PATH}/tokenizer/merges.txt (its target is missing)`,
    );
    // the source refused before connecting on: no member was reached
    expect(hops().filter((h) => !h.startsWith("operator"))).toEqual([]);
    expect(fs.existsSync(modelDir(2))).toBe(false);
});

test("a link on the source that leads outside the model directory fails naming it and its target, before any stream", async () => {
    fs.writeFileSync(path.join(dir, "id_ed25519.other"), "a private key\n");
    fs.symlinkSync(path.join(dir, "id_ed25519.other"), path.join(modelDir(1), "tokenizer", "extra.json"));
    await expect(modelChainProvider.create!(inputs([2]))).rejects.toThrow(
        `model manifest of ${HOST_PATH} on node spark-1 failed (exit 3):\n` +
            `symbolic link ${HOST_PATH}/tokenizer/extra.json leads outside the model directory ` +
            `(to ${fs.realpathSync(path.join(dir, "id_ed25519.other"))})`,
    );
    expect(hops().filter((h) => !h.startsWith("operator"))).toEqual([]);
    expect(fs.existsSync(modelDir(2))).toBe(false);
});

test("the source's own check refuses such a link too (a link made after the manifest): nothing is sent", () => {
    fs.mkdirSync(path.join(dir, "elsewhere"));
    fs.symlinkSync(path.join(dir, "elsewhere"), path.join(modelDir(1), "more"));
    const b64 = (text: string) => Buffer.from(text).toString("base64");
    const kh = Buffer.from(`${target(2).host} ${hostKey(2)}\n`).toString("base64");
    const r = spawnSync(
        "bash",
        [
            "-c",
            'exec 9<"$1"; shift; exec bash -c "$@"',
            "run",
            hostDir(1),
            HOP_SCRIPT,
            "hop",
            "self",
            b64(modelEnds(HOST_PATH).script),
            b64(`x${modelEnds(HOST_PATH).arg}x`),
            "save",
            ALL_FILES,
            node(2),
            "root@10.9.0.12",
            "22",
            kh,
            "10.9.0.12",
        ],
        { encoding: "utf8" },
    );
    expect(r.stderr).toContain(
        `symbolic link ${HOST_PATH}/more leads outside the model directory (to ${fs.realpathSync(path.join(dir, "elsewhere"))})`,
    );
    expect(r.status).toBe(3);
    expect(hops()).toEqual([]);
});

test("members unpack as their own user with their own modes: no owner or set-user-ID bit comes from the source", async () => {
    const f = path.join(modelDir(1), "tokenizer", "vocab.txt");
    fs.chmodSync(f, 0o4777);
    // as root (npm test), tar would otherwise keep the source's owner and modes; as another user it never does
    if (process.getuid?.() === 0) fs.chownSync(f, 4321, 4321);
    await modelChainProvider.create!(inputs([2]));
    const got = fs.statSync(path.join(modelDir(2), "tokenizer", "vocab.txt"));
    expect(got.mode & 0o7777).toBe(0o777 & ~process.umask());
    expect(got.uid).toBe(process.getuid?.());
});

test("no model directory on the source: fails naming the node and path, before any stream to a member", async () => {
    fs.rmSync(path.join(hostDir(1), "hub"), { recursive: true });
    await expect(modelChainProvider.create!(inputs([2]))).rejects.toThrow(`model directory ${HOST_PATH} not present on node spark-1`);
    expect(hops().filter((h) => !h.startsWith("operator"))).toEqual([]);
    expect(fs.existsSync(modelDir(2))).toBe(false);
});

test("diff: false while every member matches; a changed member file (seen by read), new content or a new member is a change", async () => {
    const r = await modelChainProvider.create!(inputs([2, 3]));
    expect((await modelChainProvider.diff!("id", r.outs, inputs([2, 3]))).changes).toBe(false);
    fs.appendFileSync(path.join(modelDir(3), "config.json"), " ");
    const read = await modelChainProvider.read!("id", r.outs);
    const seen = read.props as Outs;
    expect(seen.digests["spark-3"]).not.toBe(seen.digest);
    expect(seen.digests["spark-2"]).toBe(seen.digest);
    expect((await modelChainProvider.diff!("id", read.props, inputs([2, 3]))).changes).toBe(true);
    expect((await modelChainProvider.diff!("id", r.outs, inputs([2, 3, 4]))).changes).toBe(true);
    // new content on the source: a new digest, which the members do not match yet
    fs.writeFileSync(path.join(hostDir(1), "hub", "blobs", "b2"), '{"model_type": "qwen3"}\n');
    const again = (await modelChainProvider.read!("id", r.outs)).props as Outs;
    expect(again.digest).not.toBe((r.outs as Outs).digest);
    expect((await modelChainProvider.diff!("id", again, inputs([2, 3]))).changes).toBe(true);
});

test("parallel streams: every link carries N streams at once, the files split between them, the same model everywhere", async () => {
    for (const [name, kib] of [
        ["shard-1", 900],
        ["shard-2", 700],
        ["shard-3", 500],
        ["shard-4", 300],
    ] as const) {
        fs.writeFileSync(path.join(modelDir(1), name), Buffer.alloc(kib << 10, name.length + kib));
    }
    const r = await modelChainProvider.create!({ ...inputs([2, 3]), streams: 3 });
    const want = tree(modelDir(1));
    for (const i of [2, 3]) expect(tree(modelDir(i))).toEqual(want);
    // three chains: three connections on every link, none through the operator but to the source
    const count = (l: string) => hops().filter((h) => h === l).length;
    expect(hops()).toHaveLength(9);
    expect([count("operator -> 10.9.0.11"), count("10.9.0.11 -> 10.9.0.12"), count("10.9.0.12 -> 10.9.0.13")]).toEqual([3, 3, 3]);
    expect((r.outs as Outs).copied).toEqual(["spark-2", "spark-3"]);
    // each stream kept its landing records apart, and the check after the copy took them all and removed them
    expect(fs.readdirSync(landedRoot())).toEqual([]);
});

test("never more streams than files to send: one file goes in one stream", async () => {
    const r = await modelChainProvider.create!({ ...inputs([2]), streams: 4 });
    fs.writeFileSync(path.join(modelDir(2), "config.json"), "changed\n");
    fs.rmSync(path.join(dir, "ssh.log"));
    await modelChainProvider.update!("id", r.outs, { ...inputs([2]), streams: 4 });
    expect(hops()).toEqual(["operator -> 10.9.0.11", "10.9.0.11 -> 10.9.0.12"]);
    expect(tree(modelDir(2))).toEqual(tree(modelDir(1)));
});

test("the split: every file in exactly one stream, the largest first to the stream with the fewest bytes", () => {
    const m = fs.mkdtempSync(path.join(dir, "split-"));
    const sizes: Record<string, number> = { a: 10, b: 70, "c d": 40, e: 30, f: 30, g: 5 };
    for (const [f, n] of Object.entries(sizes)) fs.writeFileSync(path.join(m, f), Buffer.alloc(n));
    fs.writeFileSync(
        path.join(dir, "list"),
        Object.keys(sizes)
            .map((f) => `${f}\0`)
            .join(""),
    );
    const shareOf = (index: number, count: number) =>
        execFileSync("bash", ["-c", `${modelEnds(m, { index, count }).script}\nshare_of "$1"`, "ends", path.join(dir, "list")], {
            encoding: "utf8",
            env: { ...process.env, arg: `${index}/${count}\n${m}` },
        })
            .split("\0")
            .filter((f) => f !== "");
    expect(shareOf(0, 1)).toEqual(Object.keys(sizes));
    // 70 | 40 | 30+10 ... : b, then c d, then e, f to the lightest, and so on; the same split from every stream
    expect([0, 1, 2].map((i) => shareOf(i, 3))).toEqual([["b"], ["c d", "a", "g"], ["e", "f"]]);
    const two = [0, 1].map((i) => shareOf(i, 2));
    expect(two.flat().sort()).toEqual(Object.keys(sizes).sort());
    const bytes = two.map((s) => s.reduce((t, f) => t + sizes[f], 0));
    expect(bytes).toEqual([100, 85]);
});

test("over the fabric: each host dials the next at its fabric IP, under the operator's name for it", async () => {
    const fabric = (i: number) => ({ ...member(i), peerHost: `10.8.0.${10 + i}` });
    await modelChainProvider.create!({ hostPath: HOST_PATH, source: member(1), members: [2, 3].map(fabric), streams: 1 });
    expect(hops()).toEqual(["operator -> 10.9.0.11", "10.9.0.11 -> 10.8.0.12 as 10.9.0.12", "10.9.0.12 -> 10.8.0.13 as 10.9.0.13"]);
    for (const i of [2, 3]) expect(tree(modelDir(i))).toEqual(tree(modelDir(1)));
    // a resumed copy (only what the members lack) goes the same way
    for (const i of [2, 3]) fs.writeFileSync(path.join(modelDir(i), "config.json"), "changed\n");
    fs.rmSync(path.join(dir, "ssh.log"));
    const r = await modelChainProvider.create!({ hostPath: HOST_PATH, source: member(1), members: [2, 3].map(fabric), streams: 1 });
    expect((r.outs as Outs).copied).toEqual(["spark-2", "spark-3"]);
    expect(hops()).toEqual(["operator -> 10.9.0.11", "10.9.0.11 -> 10.8.0.12 as 10.9.0.12", "10.9.0.12 -> 10.8.0.13 as 10.9.0.13"]);
});

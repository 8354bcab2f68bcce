/**
 * Faults of the image chain that sends only the layers a host lacks, on the simulated hosts' real sshd and Docker
 * engines, through the real ImageChain provider: a copy cut mid-stream (spark-2's ssh session killed while the new
 * layer travels over a fabric capped at 100 Mbit/s) and a layer that arrives corrupted (one byte flipped in the
 * stream by a stand-in `docker save` on the operator, the chain's `local` source; every other part is real). Each must
 * fail naming the host and the cause, leave nothing to clean up, and the next copy must converge. (A host that
 * cannot be reached on the fabric is refused by preflight, naming both hosts: tests/unit/preflight.test.ts.)
 */
import * as fs from "fs";
import * as os from "os";
import * as path from "path";
import { shellQuote } from "../../infra/builders/quote";
import { sshCommand } from "../../infra/builders/ssh";
import { imageChainProvider } from "../../infra/providers/imageChain";
import { Hosts, runArgv, stackConfig, waitFor } from "./hosts";

const hosts = new Hosts(stackConfig(path.join(__dirname, "..", "..", "stacks", "Pulumi.local.yaml")));
const [src, dst] = hosts.cfg.nodes.map((n) => n.name);
const TESTBED = path.join(__dirname, "..", "testbed", "testbed");
const BASE = "vcl-chain-fault-base:1";
const IMG = "vcl-chain-fault:1";
/** The new layer: large enough to be cut while it travels at 100 Mbit/s (about 13 s). */
const LAYER_MB = 160;

const source = { kind: "host" as const, node: src, target: hosts.target(src) };
const member = { node: dst, target: hosts.target(dst), peerHost: hosts.node(dst).fabricIp };

async function sh(script: string, what: string, timeoutMs = 600_000): Promise<string> {
    const r = await runArgv(["bash", "-c", script], { timeoutMs });
    if (r.code !== 0) throw new Error(`${what} failed (exit ${r.code}): ${r.stderr.trim().split("\n").slice(-8).join("\n")}`);
    return r.stdout;
}
const onHost = (node: string, script: string) => hosts.must(node, ["sh", "-c", script], 600_000);
const removeImg = (node: string) => hosts.docker(node, ["image", "rm", "--force", IMG]);

/** The copy of IMG to spark-2: rejects with the provider's error, or resolves with its outputs. */
function copy(from: typeof source | { kind: "local" } = source) {
    return imageChainProvider.create!({ ref: IMG, source: from, members: [member], layers: "missing" });
}

let want = "";

beforeAll(async () => {
    // a base of random bytes, and the image: the base and one new layer (docker cp and commit: the base has no shell)
    await onHost(
        src,
        `docker image inspect ${BASE} >/dev/null 2>&1 || { d=$(mktemp -d) && head -c 16M /dev/urandom >"$d/base" && ` +
            `tar -C "$d" -c base | docker import - ${BASE} >/dev/null; rc=$?; rm -rf "$d"; exit $rc; }`,
    );
    await onHost(
        src,
        `docker image inspect ${IMG} >/dev/null 2>&1 || { d=$(mktemp -d) && head -c ${LAYER_MB}M /dev/urandom >"$d/update" && ` +
            `c=$(docker create ${BASE} /update) && docker cp "$d/update" "$c:/update" && docker commit "$c" ${IMG} >/dev/null; ` +
            `rc=$?; docker rm "$c" >/dev/null 2>&1; rm -rf "$d"; exit $rc; }`,
    );
    want = (await hosts.must(src, ["docker", "image", "inspect", "--format", "{{.Id}}", IMG])).trim();
    // spark-2 holds the base only
    await removeImg(dst);
    await imageChainProvider.create!({ ref: BASE, source, members: [member], layers: "all" });
    expect(await hosts.imageId(dst, BASE)).not.toBe("");
}, 1_200_000);

afterAll(async () => {
    await runArgv([TESTBED, "shape", "mgmt=off", "fabric=off"], { timeoutMs: 120_000 });
    for (const n of [src, dst]) await hosts.docker(n, ["image", "rm", "--force", IMG, BASE]);
    await runArgv(["docker", "image", "rm", "--force", IMG, BASE]);
}, 300_000);

test("a copy cut mid-stream fails naming the host and the cause; the next copy sends the layer again and converges", async () => {
    await sh(`${shellQuote(TESTBED)} shape mgmt=off fabric=100mbit`, "testbed shape");
    try {
        await removeImg(dst);
        const running = copy().then(
            () => "",
            (e: Error) => e.message,
        );
        // spark-2's end of the chain (the last hop: `... load spark-2`) is receiving: cut its ssh session
        const hop = "pgrep -f '[ ]load spark-2$' | head -n 1";
        await waitFor("spark-2's hop", async () => (await hosts.on(dst, ["sh", "-c", hop])).stdout.trim() !== "", 120_000, 200);
        await new Promise((r) => setTimeout(r, 3000));
        await onHost(
            dst,
            `p=$(${hop}); while [ -n "$p" ] && [ "$(ps -o comm= -p "$p")" != sshd ]; do p=$(ps -o ppid= -p "$p" | tr -d ' '); done; ` +
                `[ -n "$p" ] && kill -KILL "$p"`,
        );
        const error = await running;
        console.log(`copy cut mid-stream:\n${error}`);
        expect(error).toContain(`image ${IMG} from node ${src}: not on node ${dst} after the chain copy of 1 of 2 layers`);
        expect(error).toMatch(/closed by remote host|Broken pipe|connection (reset|closed)/i);
        expect(await hosts.imageId(dst, IMG)).toBe("");
    } finally {
        await sh(`${shellQuote(TESTBED)} shape mgmt=off fabric=off`, "testbed shape off");
    }
    // no manual cleanup: the next copy converges, sending the missing layer only
    const outs = (await copy()).outs as { copied: string[]; sent: string };
    expect(outs.copied).toEqual([dst]);
    expect(outs.sent).toBe("1 of 2 layers");
    expect(await hosts.imageId(dst, IMG)).toBe(want);
}, 900_000);

test("a layer that arrives corrupted is refused by spark-2's docker load, named with the host; the next copy converges", async () => {
    // the operator's engine is the chain's source here: the image from spark-1, streamed with a stand-in `docker`
    // whose `save` flips one byte inside the new layer (80 MiB in: the new layer, whichever order the archive has)
    await sh(
        `set -o pipefail; ${sshCommand(hosts.target(src), ["docker", "save", IMG], false)} | docker load >/dev/null`,
        "image to the operator's engine",
    );
    const shim = fs.mkdtempSync(path.join(os.tmpdir(), "vcl-corrupt-"));
    fs.writeFileSync(
        path.join(shim, "flip.py"),
        [
            "import sys",
            "at, n = 80 << 20, 0",
            "while True:",
            "    b = bytearray(sys.stdin.buffer.read(1 << 20))",
            "    if not b:",
            "        break",
            "    if n <= at < n + len(b):",
            "        b[at - n] ^= 0xFF",
            "    n += len(b)",
            "    sys.stdout.buffer.write(b)",
            "",
        ].join("\n"),
    );
    fs.writeFileSync(
        path.join(shim, "docker"),
        [
            "#!/usr/bin/env bash",
            "# stand-in: the real docker, except that save's stream has one byte flipped",
            `PATH=\${PATH#${shim}:}`,
            `if [ "$1" = save ]; then set -o pipefail; docker "$@" | python3 ${shim}/flip.py; exit; fi`,
            'exec docker "$@"',
            "",
        ].join("\n"),
        { mode: 0o755 },
    );
    const savedPath = process.env.PATH;
    await removeImg(dst);
    let error = "";
    try {
        process.env.PATH = `${shim}:${savedPath}`;
        await copy({ kind: "local" }).catch((e: Error) => (error = e.message));
    } finally {
        process.env.PATH = savedPath;
        fs.rmSync(shim, { recursive: true, force: true });
    }
    console.log(`corrupted layer:\n${error}`);
    expect(error).toContain(`image ${IMG} from the local docker engine: not on node ${dst} after the chain copy of 1 of 2 layers`);
    // the host's own docker load checked the layer against the image config and refused it
    expect(error).toMatch(new RegExp(`\\[${dst}\\] .*(invalid diffID|digest|unexpected EOF|checksum)`, "i"));
    expect(await hosts.imageId(dst, IMG)).toBe("");
    const outs = (await copy({ kind: "local" })).outs as { copied: string[]; sent: string };
    expect(outs.copied).toEqual([dst]);
    expect(await hosts.imageId(dst, IMG)).toBe(want);
}, 900_000);

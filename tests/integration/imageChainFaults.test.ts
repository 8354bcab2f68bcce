/**
 * Faults of the image chain that sends only the layers a host lacks, on the simulated hosts' real sshd and Docker
 * engines, through the real ImageChain provider: a copy cut mid-stream (the receiver's ssh session killed while the
 * new layer travels over a fabric capped at 100 Mbit/s) and a layer that arrives corrupted (one byte flipped in the
 * stream by a stand-in `docker save` on the operator, the chain's `local` source; every other part is real). Each must
 * fail naming the host and the cause, leave nothing to clean up, and the next copy must converge. Each runs on two
 * pairs of engines (tests/testbed `up --engine`): Debian's Docker 20.10 to 20.10 (spark-1 to spark-2), and Docker 28
 * on the containerd image store to the same (spark-2 to spark-3), whose `docker load` takes a stream without the
 * layers it holds and exits 0 on a layer it cannot unpack. (A host that cannot be reached on the fabric is refused by
 * preflight, naming both hosts: tests/unit/preflight.test.ts.)
 */
import * as fs from "fs";
import * as os from "os";
import * as path from "path";
import { shellQuote } from "../../infra/builders/quote";
import { sshCommand } from "../../infra/builders/ssh";
import { sameImage, savesOciLayout } from "../../infra/builders/image";
import { imageChainProvider } from "../../infra/providers/imageChain";
import { Hosts, runArgv, stackConfig, waitFor } from "./hosts";

const local = stackConfig(path.join(__dirname, "..", "..", "stacks", "Pulumi.local.yaml"));
/** The local stack's hosts and spark-3, configured as spark-2 is. */
const hosts = new Hosts({
    ...local,
    nodes: [...local.nodes, { ...local.nodes[1], name: "spark-3", sshHost: "10.231.0.13", fabricIp: "10.232.0.13" }],
});
const TESTBED = path.join(__dirname, "..", "testbed", "testbed");
const TESTBED_DIR = process.env.VCL_TESTBED_DIR ?? "/var/lib/vllm-cluster-testbed";
const BASE = "vcl-chain-fault-base:1";
const IMG = "vcl-chain-fault:1";
/** The new layer: large enough to be cut while it travels at 100 Mbit/s (about 13 s). */
const LAYER_MB = 160;

/** The pairs of engines: the source host, the receiving host, and the testbed's engines for them. */
const PAIRS = [
    { engines: "h1=20.10,h2=20.10", src: "spark-1", dst: "spark-2", hosts: 2 },
    { engines: "h2=28-containerd,h3=28-containerd", src: "spark-2", dst: "spark-3", hosts: 3 },
];

async function sh(script: string, what: string, timeoutMs = 600_000): Promise<string> {
    const r = await runArgv(["bash", "-c", script], { timeoutMs });
    if (r.code !== 0) throw new Error(`${what} failed (exit ${r.code}): ${r.stderr.trim().split("\n").slice(-8).join("\n")}`);
    return r.stdout;
}
const onHost = (node: string, script: string) => hosts.must(node, ["sh", "-c", script], 600_000);

/** How many hosts the testbed has now: an `up` with fewer would stop the others. */
function testbedHosts(): number {
    const file = path.join(TESTBED_DIR, "hosts.json");
    return fs.existsSync(file) ? (JSON.parse(fs.readFileSync(file, "utf8")) as { hosts: unknown[] }).hosts.length : 0;
}

describe.each(PAIRS)("image chain faults, Docker $engines ($src to $dst)", ({ engines, src, dst, hosts: need }) => {
    const source = { kind: "host" as const, node: src, target: hosts.target(src) };
    const member = { node: dst, target: hosts.target(dst), peerHost: hosts.node(dst).fabricIp };
    const removeImg = (node: string) => hosts.docker(node, ["image", "rm", "--force", IMG]);
    let count = 0;

    /** The copy of IMG to the receiver: rejects with the provider's error, or resolves with its outputs. */
    function copy(from: typeof source | { kind: "local" } = source) {
        return imageChainProvider.create!({ ref: IMG, source: from, members: [member], layers: "missing" });
    }

    let want = "";

    beforeAll(async () => {
        count = Math.max(testbedHosts(), need);
        await sh(`${shellQuote(TESTBED)} up ${count} --engine ${engines}`, `testbed up ${count} --engine ${engines}`, 1_800_000);
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
        // the receiver holds the base only
        await removeImg(dst);
        await imageChainProvider.create!({ ref: BASE, source, members: [member], layers: "all" });
        expect(await hosts.imageId(dst, BASE)).not.toBe("");
    }, 2_400_000);

    afterAll(async () => {
        await runArgv([TESTBED, "shape", "mgmt=off", "fabric=off"], { timeoutMs: 120_000 });
        for (const n of [src, dst]) await hosts.docker(n, ["image", "rm", "--force", IMG, BASE]);
        await runArgv(["docker", "image", "rm", "--force", IMG, BASE]);
        // the engines the stage runs (VCL_TESTBED_ENGINE, else 20.10), on as many hosts as before
        await runArgv([TESTBED, "up", String(count)], { timeoutMs: 1_200_000 });
    }, 1_500_000);

    test("a copy cut mid-stream fails naming the host and the cause; the next copy sends the layer again and converges", async () => {
        await sh(`${shellQuote(TESTBED)} shape mgmt=off fabric=100mbit`, "testbed shape");
        try {
            await removeImg(dst);
            const running = copy().then(
                () => "",
                (e: Error) => e.message,
            );
            // the receiver's end of the chain (the last hop: `... load <dst>`) is receiving: cut its ssh session
            const hop = `pgrep -f '[ ]load ${dst}$' | head -n 1`;
            await waitFor(`${dst}'s hop`, async () => (await hosts.on(dst, ["sh", "-c", hop])).stdout.trim() !== "", 120_000, 200);
            await new Promise((r) => setTimeout(r, 3000));
            await onHost(
                dst,
                `p=$(${hop}); while [ -n "$p" ] && [ "$(ps -o comm= -p "$p")" != sshd ]; do p=$(ps -o ppid= -p "$p" | tr -d ' '); done; ` +
                    `[ -n "$p" ] && kill -KILL "$p"`,
            );
            const error = await running;
            console.log(`copy cut mid-stream (${engines}):\n${error}`);
            expect(error).toContain(`image ${IMG} from node ${src}: not on node ${dst} after the chain copy of 1 of 2 layers`);
            expect(error).toMatch(/closed by remote host|Broken pipe|connection (reset|closed)/i);
            expect(await hosts.imageId(dst, IMG)).toBe("");
        } finally {
            await sh(`${shellQuote(TESTBED)} shape mgmt=off fabric=off`, "testbed shape off");
        }
        // no manual cleanup: the next copy converges, sending the missing layer only
        const outs = (await copy()).outs as { copied: string[]; sent: string; images: Record<string, string>; sourceImage: string };
        expect(outs.copied).toEqual([dst]);
        expect(outs.sent).toBe("1 of 2 layers");
        expect(sameImage(outs.images[dst], outs.sourceImage)).toBe(true);
        if (!engines.includes("containerd")) expect(await hosts.imageId(dst, IMG)).toBe(want);
    }, 900_000);

    test("a layer that arrives corrupted is refused by the receiver's docker load, named with the host; the next copy converges", async () => {
        // the operator's engine is the chain's source here: the image from the source host, streamed with a stand-in
        // `docker` whose `save` flips one byte inside the new layer (80 MiB in: the new layer, whichever order the
        // archive has)
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
        // what the operator's engine sends a containerd store that holds the base: an archive of Docker before 25 names
        // layers by files, which that store's load cannot do without, so the whole image
        const localVersion = (await sh("docker version --format '{{.Server.Version}}'", "docker version")).trim();
        const sent =
            engines.includes("containerd") && !savesOciLayout(localVersion)
                ? `whole image (Docker ${localVersion} on the local docker engine saves layers as files, which a containerd-store host's load cannot do without)`
                : "1 of 2 layers";
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
        console.log(`corrupted layer (${engines}):\n${error}`);
        expect(error).toContain(`image ${IMG} from the local docker engine: not on node ${dst} after the chain copy of ${sent}`);
        // the host's own docker load checked the layer against the image config and refused it (the containerd
        // store's load keeps the image it cannot unpack: the chain's load end removed it)
        expect(error).toMatch(new RegExp(`\\[${dst}\\] .*(invalid diffID|wrong diff id|digest|unexpected EOF|checksum)`, "i"));
        expect(await hosts.imageId(dst, IMG)).toBe("");
        const outs = (await copy({ kind: "local" })).outs as { copied: string[]; images: Record<string, string>; sourceImage: string };
        expect(outs.copied).toEqual([dst]);
        expect(sameImage(outs.images[dst], outs.sourceImage)).toBe(true);
        if (!engines.includes("containerd")) expect(await hosts.imageId(dst, IMG)).toBe(want);
    }, 900_000);
});

/**
 * model.hub on the simulated hosts through the real Pulumi engine, against a STAND-IN for the Hugging Face Hub's
 * file API (tests/testbed/hub_standin.py, on the management network at 10.231.0.1: no hub is reachable here). The
 * client is real: huggingface_hub in the test image, on spark-1. The model is downloaded once there, verified
 * against the Hub's checksums, copied to spark-2 by the model chain, and served. A second up downloads nothing; a
 * download cut mid-file resumes; a wrong revision, a missing repo or a refused token fail naming the cause before
 * any host is changed; the token is never in the state in clear. Run by tests/integration/run.sh.
 */
import * as crypto from "crypto";
import * as fs from "fs";
import * as os from "os";
import * as path from "path";
import { HUB_DOWNLOAD_CONTAINER } from "../../infra/builders/hub";
import { HubStandin, startHubStandin } from "../lib/hubStandin";
import {
    Project,
    changed,
    cliExport,
    destroy,
    editConfig,
    expectOk,
    openProject,
    preview,
    removeProject,
    stepSeconds,
    up,
    withoutMonitoring,
} from "./engine";
import { Hosts, runArgv, stackConfig, waitFor } from "./hosts";
import { chat, mergeTimings } from "./support";

const TIMINGS_FILE = process.env.VCL_INTEGRATION_TIMINGS;

const TESTBED = process.env.VCL_TESTBED_DIR ?? "/var/lib/vllm-cluster-testbed";
const TINY_MODEL = path.join(TESTBED, "models", "tiny-qwen2");
/** The client writes a download in 10 MB chunks: padding makes the repo big enough to be cut after the first. */
const PADDING_MB = 24;
const REPO = "vllm-cluster-test/tiny-qwen2";
/** The same files and one more, extra.bin, served with its first byte flipped (its metadata keeps the true sha256). */
const CORRUPTED = "vllm-cluster-test/tiny-qwen2-corrupted";
const TOKEN = "hf_standin_token_3f9a0c1d7e";
const [head, worker] = ["spark-1", "spark-2"];

let hub: HubStandin | undefined;
let repoDir: string;
let url = "";
let commit = "";
let corruptedCommit = "";
let work: string;
let hubLog: string;
let rateFile: string;
let hostPath: string;
let p: Project;
let hosts: Hosts;

interface HubRequest {
    method: string;
    path: string;
    range: string | null;
    status: number;
    bytes: number;
    token: boolean;
}

function requests(): HubRequest[] {
    return fs.existsSync(hubLog)
        ? fs
              .readFileSync(hubLog, "utf8")
              .split("\n")
              .filter(Boolean)
              .map((l) => JSON.parse(l) as HubRequest)
        : [];
}
const fileGets = (rs: HubRequest[]) => rs.filter((r) => r.method === "GET" && r.path.includes("/resolve/"));

function setHub(fields: Record<string, string>): void {
    editConfig(p, (cfg) => {
        const model = cfg.model as { hub: Record<string, string> };
        model.hub = { ...model.hub, ...fields };
    });
}

beforeAll(async () => {
    work = fs.mkdtempSync(path.join(os.tmpdir(), "vcl-hub-"));
    hubLog = path.join(work, "requests.jsonl");
    rateFile = path.join(work, "rate");
    // the repo: the test model, and a file vLLM ignores that makes the download long enough to cut
    repoDir = path.join(work, "repo");
    fs.cpSync(TINY_MODEL, repoDir, { recursive: true });
    fs.writeFileSync(path.join(repoDir, "padding.bin"), crypto.randomBytes(PADDING_MB * 1024 * 1024));
    const corruptedDir = path.join(work, "corrupted");
    fs.cpSync(repoDir, corruptedDir, { recursive: true });
    fs.writeFileSync(path.join(corruptedDir, "extra.bin"), crypto.randomBytes(65536));
    const args = ["--bind", "10.231.0.1", "--port", "0", "--token", TOKEN, "--log", hubLog, "--rate-file", rateFile];
    hub = await startHubStandin([
        ...args,
        "--repo",
        `${REPO}=${repoDir}`,
        "--repo",
        `${CORRUPTED}=${corruptedDir}`,
        "--corrupt",
        `${CORRUPTED}:extra.bin`,
    ]);
    const ready = hub;
    url = ready.url;
    commit = ready.commits[REPO];
    corruptedCommit = ready.commits[CORRUPTED];

    p = await openProject("local", "vcl-it-hub-");
    withoutMonitoring(p);
    hosts = new Hosts(stackConfig(p.stackFile));
    // each host's own directory: spark-2 sees only what the model chain copies to it
    hostPath = path.posix.join(TESTBED, "own", "models", "hub-tiny-qwen2");
    for (const n of [head, worker]) {
        await hosts.removeProjectContainers(n);
        await hosts.must(n, ["rm", "-rf", hostPath]);
    }
    editConfig(p, (cfg) => {
        cfg.model = {
            hostPath,
            containerPath: "/models/tiny-qwen2",
            servedName: "tiny-qwen2",
            hub: { repo: REPO, revision: commit, endpoint: url },
        };
    });
    await p.stack.setConfig("hfToken", { value: TOKEN, secret: true });
}, 600_000);

afterAll(async () => {
    hub?.stop();
    if (p) {
        if (process.env.VCL_INTEGRATION_KEEP !== "1") await destroy(p);
        removeProject(p);
    }
    fs.rmSync(work, { recursive: true, force: true });
}, 600_000);

describe("model.hub against a stand-in of the Hub's file API", () => {
    test("a wrong revision, a missing repo, a refused token: each fails naming the cause, and no host is changed", async () => {
        const cases: [Record<string, string>, string | undefined, RegExp][] = [
            [{ revision: "0".repeat(40) }, undefined, new RegExp(`model\\.hub\\.revision: ${"0".repeat(40)} is not a revision of ${REPO}`)],
            [
                { repo: "vllm-cluster-test/no-such-model" },
                undefined,
                /model\.hub\.repo: no repo vllm-cluster-test\/no-such-model on the Hub/,
            ],
            [{}, "hf_wrong_token", /hfToken: the Hub refused the token for vllm-cluster-test\/tiny-qwen2 \(401/],
        ];
        for (const [fields, token, why] of cases) {
            setHub({ repo: REPO, revision: commit, ...fields });
            await p.stack.setConfig("hfToken", { value: token ?? TOKEN, secret: true });
            const r = await up(p);
            expect(r.ok).toBe(false);
            expect(`${r.output}\n${r.error}`).toMatch(why);
            expect(`${r.output}\n${r.error}`).not.toContain(token ?? TOKEN);
            expect((await hosts.on(head, ["test", "-e", hostPath])).code).not.toBe(0);
            expect(await hosts.projectContainers(head, "local")).toEqual([]);
        }
        setHub({ repo: REPO, revision: commit });
        await p.stack.setConfig("hfToken", { value: TOKEN, secret: true });
        expect(fileGets(requests())).toEqual([]);
    }, 900_000);

    test("a download cut mid-file fails naming it; the next up resumes it (Range), verifies, copies and serves", async () => {
        fs.writeFileSync(rateFile, String(2 * 1024 * 1024)); // the padding takes about 12 s
        const running = up(p);
        // the download's partial file: <dir>/.cache/vllm-cluster/padding.bin.partial
        const partial = `stat -c %s ${path.posix.join(hostPath, ".cache", "vllm-cluster", "padding.bin.partial")} 2>/dev/null || echo 0`;
        await waitFor(
            "the padding to be partly downloaded on spark-1",
            async () => Number((await hosts.on(head, ["sh", "-c", partial])).stdout.trim() || 0) >= 10_000_000,
            300_000,
            250,
        );
        await hosts.must(head, ["docker", "kill", HUB_DOWNLOAD_CONTAINER]);
        const cut = await running;
        expect(cut.ok).toBe(false);
        expect(`${cut.output}\n${cut.error}`).toMatch(new RegExp(`model\\.hub: downloading ${REPO}@${commit} on node spark-1 failed`));
        fs.rmSync(rateFile);

        const r = expectOk(await up(p));
        expect(r.outputs.modelCommit).toBe(commit);
        if (TIMINGS_FILE) {
            mergeTimings(TIMINGS_FILE, { "model.hub: resumed download on spark-1 (stand-in hub)": stepSeconds(r, "model-hub") });
        }
        const padding = fileGets(requests()).filter((q) => q.path.endsWith("/padding.bin"));
        const resumed = padding[padding.length - 1];
        expect(resumed.range).toMatch(/^bytes=\d+-$/);
        expect(Number(/\d+/.exec(resumed.range!)![0])).toBeGreaterThanOrEqual(10_000_000);
        expect(resumed.bytes).toBe(PADDING_MB * 1024 * 1024 - Number(/\d+/.exec(resumed.range!)![0]));
        expect(resumed.status).toBe(206);
        expect(fileGets(requests()).every((q) => q.token)).toBe(true);
        // the same bytes as the Hub's files, as regular files, on both hosts
        const want = (await runArgv(["sh", "-c", `cd ${repoDir} && sha256sum * | sort`])).stdout.trim();
        for (const n of [head, worker]) {
            expect((await hosts.must(n, ["sh", "-c", `cd ${hostPath} && sha256sum $(ls) | sort`])).trim()).toBe(want);
            expect(await hosts.must(n, ["find", hostPath, "-type", "l"])).toBe("");
        }
        expect((await chat(r.outputs.endpoint as string, "tiny-qwen2", r.outputs.apiKey as string)).status).toBe(200);
    }, 1_800_000);

    test("a second up downloads nothing, and the token is nowhere in clear", async () => {
        const before = requests().length;
        const r = expectOk(await up(p));
        expect(changed(r)).toEqual([]);
        const since = requests().slice(before);
        expect(fileGets(since)).toEqual([]); // only the revision check asked the Hub anything
        expect(since.every((q) => q.path.startsWith("/api/models/"))).toBe(true);
        expect(await cliExport(p)).not.toContain(TOKEN);
        expect(r.output).not.toContain(TOKEN);
        expect(fs.readFileSync(p.stackFile, "utf8")).not.toContain(TOKEN);
        expect((await preview(p)).ok).toBe(true);
    }, 900_000);

    test("a file whose bytes are not the Hub's fails the up naming it, and is kept aside; nothing running changes", async () => {
        const before = await hosts.containerId(head, "vllm-serve");
        setHub({ repo: CORRUPTED, revision: corruptedCommit });
        const r = await up(p);
        expect(r.ok).toBe(false);
        expect(`${r.output}\n${r.error}`).toMatch(/extra\.bin: downloaded, but its checksum is not the Hub's \([0-9a-f]{64}\); kept aside/);
        expect(await hosts.containerId(head, "vllm-serve")).toBe(before);
        setHub({ repo: REPO, revision: commit });
    }, 900_000);
});

/**
 * infra/scripts/hub_download.py (model.hub's download) run by python with each huggingface_hub client version
 * (tests/lib/hubClients.ts: 0.x speaks requests, 1.x and later httpx) against the Hub STAND-IN
 * (tests/testbed/hub_standin.py) on loopback, as the serve image runs it: token on stdin, the endpoint in HF_ENDPOINT.
 * An honest repo downloads, verified, with awkward names intact, and resumes a cut file; a hostile listing (names
 * that leave the model directory, or that the download keeps for itself) is refused before anything is fetched,
 * and no request leaves /resolve/<commit>/. On the simulated hosts, in the test image: tests/integration/hubModel.test.ts.
 */
import { spawnSync } from "child_process";
import * as crypto from "crypto";
import * as fs from "fs";
import * as os from "os";
import * as path from "path";
import { HUB_CLIENTS, hubClientPython } from "../lib/hubClients";
import { HubStandin, startHubStandin } from "../lib/hubStandin";

const SCRIPT = path.join(__dirname, "..", "..", "infra", "scripts", "hub_download.py");
const TOKEN = "hf_unit_download_token_5e1f";
const HONEST = "vllm-cluster-test/honest";
/** Where an absolute name would land if it were taken as it is (a path of this machine, checked to stay absent). */
const ABSOLUTE = path.join(os.tmpdir(), `vcl-hub-absolute-${process.pid}.txt`);

/** Names a hostile Hub (or a mirror) could list, and why each is refused. */
const HOSTILE: [string, string][] = [
    ["../../escape.txt", "an empty, '.' or '..' part"],
    ["sub/../../escape.txt", "an empty, '.' or '..' part"],
    ["..", "an empty, '.' or '..' part"],
    ["sub/./x.txt", "an empty, '.' or '..' part"],
    ["sub//x.txt", "an empty, '.' or '..' part"],
    [ABSOLUTE, "an absolute name"],
    ["", "an empty name"],
    ["sub\\..\\..\\x.txt", "a backslash in it"],
    ["line\nbreak.txt", "a control character in it"],
    ["bell\x07\x1b]0;title.txt", "a control character in it"],
    ["separator\u2028x.txt", "a control character in it"],
    [".cache/vllm-cluster/config.json.partial", "a name this download keeps for its own files"],
    [".vllm-cluster-hub.json", "a name this download keeps for its own files"],
];
/** The name as a test title shows it: ASCII, escapes for the rest; the absolute one by what it is. */
const title = (name: string) =>
    name === ABSOLUTE
        ? "an absolute path"
        : JSON.stringify(name).replace(/[^\x20-\x7e]/g, (c) => `\\u${c.charCodeAt(0).toString(16).padStart(4, "0")}`);
/** Every hostile listing with the newest client; with the others, one of each kind (the checks come before any client call). */
const hostileFor = (version: string) => HOSTILE.filter((_, i) => version === HUB_CLIENTS[HUB_CLIENTS.length - 1] || [0, 5, 8].includes(i));

let work: string;
let hub: HubStandin;
let hubLog: string;

/** The repo listings: the honest one (awkward names included), and one hostile repo per hostile name. */
beforeAll(async () => {
    work = fs.mkdtempSync(path.join(os.tmpdir(), "vcl-hub-download-"));
    hubLog = path.join(work, "requests.jsonl");
    const honest = path.join(work, "honest");
    fs.mkdirSync(honest);
    fs.writeFileSync(path.join(honest, "config.json"), '{"model_type": "qwen2"}\n');
    fs.writeFileSync(path.join(honest, "weights #1?.bin"), crypto.randomBytes(300_000));
    const nested = path.join(work, "nested.txt");
    fs.writeFileSync(nested, "nested ü\n");
    const listing = (name: string, extra: Record<string, string>) => {
        const f = path.join(work, `${name.replace("/", "_")}.json`);
        fs.writeFileSync(f, JSON.stringify(extra));
        return ["--extra", `${name}=${f}`];
    };
    const args = ["--port", "0", "--token", TOKEN, "--log", hubLog, "--repo", `${HONEST}=${honest}`];
    args.push(...listing(HONEST, { "sub dir/nested %2e%2e.txt": nested }));
    HOSTILE.forEach(([name], i) =>
        args.push("--repo", `vllm-cluster-test/hostile-${i}=${honest}`, ...listing(`vllm-cluster-test/hostile-${i}`, { [name]: nested })),
    );
    hub = await startHubStandin(args);
});
afterAll(() => {
    hub?.stop();
    fs.rmSync(work, { recursive: true, force: true });
});

interface HubRequest {
    method: string;
    path: string;
    range: string | null;
    status: number;
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

interface Download {
    code: number | null;
    stderr: string;
    result?: { commit: string; files: number; bytes: number; fetched: string[] };
}

/** hub_download.py REPO COMMIT DEST with this client, the token on stdin, the stand-in as the endpoint. */
function download(python: string, repo: string, dest: string): Download {
    const r = spawnSync(python, [SCRIPT, repo, hub.commits[repo], dest], {
        input: `${TOKEN}\n`,
        encoding: "utf8",
        env: { PATH: process.env.PATH, HOME: work, HF_ENDPOINT: hub.url, HF_HUB_OFFLINE: "0", HF_HUB_DISABLE_TELEMETRY: "1" },
        timeout: 120_000,
    });
    return { code: r.status, stderr: r.stderr, result: r.status === 0 ? JSON.parse(r.stdout) : undefined };
}

/** Every file under `root`, links not followed. */
function files(root: string): string[] {
    const out: string[] = [];
    const walk = (rel: string) => {
        for (const e of fs.readdirSync(path.join(root, rel), { withFileTypes: true })) {
            const p = path.join(rel, e.name);
            if (e.isDirectory()) walk(p);
            else out.push(p);
        }
    };
    if (fs.existsSync(root)) walk("");
    return out.sort();
}

describe.each(HUB_CLIENTS)("huggingface_hub %s", (version) => {
    let python: string;
    beforeAll(() => {
        python = hubClientPython(version);
        const v = spawnSync(python, ["-c", "import huggingface_hub; print(huggingface_hub.__version__)"], { encoding: "utf8" });
        expect(v.stdout.trim()).toBe(version);
    }, 300_000);

    test("an honest repo: every file verified and in place, awkward names intact; the next run fetches nothing; a cut file resumes", () => {
        const dest = fs.mkdtempSync(path.join(work, "dest-"));
        const before = requests().length;
        const first = download(python, HONEST, dest);
        expect(first.stderr).not.toMatch(/Traceback/);
        expect(first.code).toBe(0);
        const names = ["config.json", "sub dir/nested %2e%2e.txt", "weights #1?.bin"];
        expect(first.result!.fetched.sort()).toEqual(names);
        expect(files(dest)).toEqual([".vllm-cluster-hub.json", ...names]);
        expect(fs.readFileSync(path.join(dest, "sub dir", "nested %2e%2e.txt"), "utf8")).toBe("nested ü\n");
        const gets = requests()
            .slice(before)
            .filter((q) => q.path.includes("/resolve/"));
        expect(gets.map((q) => decodeURIComponent(q.path.replace(`/${HONEST}/resolve/${hub.commits[HONEST]}/`, ""))).sort()).toEqual(names);
        expect(gets.every((q) => q.token && q.status === 200)).toBe(true);
        expect(download(python, HONEST, dest).result!.fetched).toEqual([]);

        // a download cut after 100000 bytes continues from there (Range), whatever the client
        const weights = path.join(dest, "weights #1?.bin");
        const partial = path.join(dest, ".cache", "vllm-cluster", "weights #1?.bin.partial");
        fs.mkdirSync(path.dirname(partial), { recursive: true });
        fs.writeFileSync(partial, fs.readFileSync(weights).subarray(0, 100_000));
        const whole = fs.readFileSync(weights);
        fs.rmSync(weights);
        const mark = requests().length;
        const resumed = download(python, HONEST, dest);
        expect(resumed.code).toBe(0);
        expect(resumed.result!.fetched).toEqual(["weights #1?.bin"]);
        expect(fs.readFileSync(weights).equals(whole)).toBe(true);
        const range = requests()
            .slice(mark)
            .filter((q) => q.path.includes("/resolve/"));
        expect(range.map((q) => [q.range, q.status])).toEqual([["bytes=100000-", 206]]);
    }, 120_000);

    const hostileCases = hostileFor(version).map(([name, why]) => [title(name), HOSTILE.findIndex(([n]) => n === name), why] as const);
    test.each(hostileCases)(
        "a listing naming %s is refused before anything is fetched, naming the file",
        (_shown, i, why) => {
            const repo = `vllm-cluster-test/hostile-${i}`;
            const dest = path.join(fs.mkdtempSync(path.join(work, "hostile-")), "a", "b", "model");
            const before = requests().length;
            const r = download(python, repo, dest);
            expect(r.stderr).not.toMatch(/Traceback/);
            expect(r.code).toBe(5);
            expect(r.stderr).toContain(`hub download: ${repo}@${hub.commits[repo]} lists a file named `);
            expect(r.stderr).toContain(`: ${why}; nothing was downloaded`);
            // nothing fetched, so no request anywhere but the listing; nothing written outside or inside
            expect(
                requests()
                    .slice(before)
                    .filter((q) => !q.path.startsWith("/api/models/")),
            ).toEqual([]);
            expect(files(path.dirname(path.dirname(path.dirname(dest))))).toEqual([]);
            expect(fs.existsSync(ABSOLUTE)).toBe(false);
        },
        60_000,
    );

    test("a name whose way into the model directory goes through a link already there is refused; so is a linked .cache", () => {
        const root = fs.mkdtempSync(path.join(work, "linked-"));
        const outside = path.join(root, "outside");
        const dest = path.join(root, "model");
        fs.mkdirSync(outside);
        fs.mkdirSync(dest);
        fs.symlinkSync(outside, path.join(dest, "sub dir"));
        const r = download(python, HONEST, dest);
        expect(r.code).toBe(5);
        expect(r.stderr).toContain(
            "lists a file named 'sub dir/nested %2e%2e.txt': it would land outside the model directory (a link on its way there)",
        );
        fs.rmSync(path.join(dest, "sub dir"));
        fs.symlinkSync(outside, path.join(dest, ".cache"));
        const cache = download(python, HONEST, dest);
        expect(cache.code).toBe(5);
        expect(cache.stderr).toContain("its partial download would land outside the model directory (a link on .cache/vllm-cluster)");
        expect(files(outside)).toEqual([]);
    }, 60_000);
});

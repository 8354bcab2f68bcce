/**
 * `npm run status` (setup/status.js) end to end on this machine: stand-in `pulumi` prints the stack's outputs,
 * stand-in `ssh` runs the real probe command line with each host's stand-in docker and curl (tests/unit/statusHosts.ts),
 * or refuses, or never answers. Both forms, a host that does not answer within the bound, and every refusal
 * naming what is missing.
 */
import { spawn } from "child_process";
import * as fs from "fs";
import * as path from "path";
import { ROOT, outputsOf, standInClient, tempState, twoHosts } from "./statusHosts";

let state: string;
beforeEach(() => (state = tempState("vcl-status-cli-")));
afterEach(() => fs.rmSync(state, { recursive: true, force: true }));

const REFUSED = "ssh: connect to host 10.231.0.12 port 22: Connection refused";

/** Runs status.js with `bin` first on PATH; resolves with its exit, output and how long it took. */
function status(
    bin: string,
    args: string[],
    timeoutMs = 30_000,
): Promise<{ code: number | null; stdout: string; stderr: string; ms: number }> {
    return new Promise((resolve, reject) => {
        const t0 = Date.now();
        const env = { ...process.env, PATH: `${bin}:${process.env.PATH}`, XDG_CACHE_HOME: path.join(state, "cache") };
        const p = spawn("node", [path.join(ROOT, "setup", "status.js"), ...args], { cwd: ROOT, env, stdio: ["ignore", "pipe", "pipe"] });
        let stdout = "";
        let stderr = "";
        p.stdout.on("data", (d) => (stdout += d));
        p.stderr.on("data", (d) => (stderr += d));
        const timer = setTimeout(() => {
            p.kill("SIGKILL");
            reject(new Error(`status.js ${args.join(" ")}: no exit within ${timeoutMs} ms`));
        }, timeoutMs);
        p.on("close", (code) => {
            clearTimeout(timer);
            resolve({ code, stdout, stderr, ms: Date.now() - t0 });
        });
    });
}

describe("npm run status", () => {
    test("--json: one object for both hosts; a host that refuses the connection is unreachable with ssh's words", async () => {
        const [head] = twoHosts(state);
        const client = standInClient(
            state,
            { "root@10.231.0.11": { bin: head.bin }, "root@10.231.0.12": { refuse: REFUSED } },
            { outputs: outputsOf(state) },
        );
        const r = await status(client.bin, ["--stack", "test", "--json"]);
        expect(r.stderr).toBe("");
        expect(r.code).toBe(0);
        const j = JSON.parse(r.stdout);
        expect(j).toMatchObject({ stack: "test", backend: "ray", endpoint: "https://10.231.0.11:8000/v1", servedModelName: "tiny-qwen2" });
        expect(j.hosts[0]).toMatchObject({ node: "spark-1", reachable: true, error: null });
        expect(j.hosts[0].containers.map((c: { name: string }) => c.name)).toEqual(["vllm-ray-head", "vllm-serve"]);
        expect(j.hosts[1]).toMatchObject({ node: "spark-2", reachable: false, error: REFUSED });
        expect(j.ray).toMatchObject({ ok: true, members: { "spark-1": "10.232.0.11", "spark-2": "10.232.0.12" } });
        expect(j.serving).toMatchObject({ ok: true, window: "since start", running: 8, waiting: 5 });
        // the outputs without --show-secrets; one ssh session per host
        const log = client.log();
        // the state without its secrets: no passphrase asked for, the API key never decrypted
        expect(log.filter((l) => l.startsWith("pulumi"))).toEqual(["pulumi stack export --stack test"]);
        expect(r.stdout).not.toContain("ciphertext");
        expect(log.filter((l) => l.startsWith("ssh")).sort()).toEqual(["ssh root@10.231.0.11", "ssh root@10.231.0.12"]);
    }, 30_000);

    test("the terminal form: the stopped worker shown as such, its verdict beside it", async () => {
        const [head, worker] = twoHosts(state);
        const client = standInClient(
            state,
            { "root@10.231.0.11": { bin: head.bin }, "root@10.231.0.12": { bin: worker.bin } },
            { outputs: outputsOf(state) },
        );
        const r = await status(client.bin, ["--stack", "test"]);
        expect(r.code).toBe(0);
        expect(r.stdout).toMatch(/^vllm-cluster status at \d{4}-\d\d-\d\d \d\d:\d\d:\d\d UTC \(asked in \d+\.\d s\)\n/);
        expect(r.stdout).toMatch(
            /\n {2}vllm-ray-worker +ray-worker +exited .+ ago \(exit 137\) +0 +1 of 4 +exited with 137 \(start 1 of at most 4\)\n/,
        );
        expect(r.stdout).toContain("\nspark-2 (worker, root@10.231.0.12): answered in ");
        expect(r.stdout).toContain("\nRay: 2 members on their fabric IPs (spark-1 10.232.0.11, spark-2 10.232.0.12), 2 GPUs\n");
        expect(r.stdout).not.toContain("\x1b");
    }, 30_000);

    test("a host that never answers is cut at --timeout, its ssh stopped; the other host is shown all the same", async () => {
        const [head] = twoHosts(state);
        const client = standInClient(
            state,
            { "root@10.231.0.11": { bin: head.bin }, "root@10.231.0.12": { hang: true } },
            { outputs: outputsOf(state) },
        );
        const r = await status(client.bin, ["--stack", "test", "--json", "--timeout", "1"]);
        expect(r.code).toBe(0);
        expect(r.ms).toBeLessThan(8000);
        const j = JSON.parse(r.stdout);
        expect(j.hosts[1]).toMatchObject({ reachable: false, error: "no answer within 1 s" });
        expect(j.hosts[0].reachable).toBe(true);
        // the hung ssh went with its process group (a zombie until its new parent reaps it: gone all the same)
        const pid = Number(fs.readFileSync(path.join(state, "hung"), "utf8").trim());
        const alive = () => {
            try {
                return !/^\d+ \(.*\) Z /.test(fs.readFileSync(`/proc/${pid}/stat`, "utf8"));
            } catch {
                return false;
            }
        };
        for (const deadline = Date.now() + 5000; alive() && Date.now() < deadline;) await new Promise((r) => setTimeout(r, 50));
        expect(alive()).toBe(false);
    }, 30_000);

    test("a host that floods its answer (terminal controls, without end) is cut at 1 MiB and named; the other host is shown", async () => {
        const [head] = twoHosts(state);
        const client = standInClient(
            state,
            { "root@10.231.0.11": { bin: head.bin }, "root@10.231.0.12": { flood: '{"probe":"status"\x1b[2J\x1b]0;owned\x07' } },
            { outputs: outputsOf(state) },
        );
        const text = await status(client.bin, ["--stack", "test"]);
        expect(text.code).toBe(0);
        expect(text.stdout).toContain("\nspark-2 (worker, root@10.231.0.12): no status: its probe answered more than 1048576 bytes\n");
        expect(text.stdout).toContain("\nspark-1 (head, root@10.231.0.11): answered in ");
        expect(text.stdout).not.toMatch(/[\x00-\x09\x0b-\x1f\x7f]/);
        const r = await status(client.bin, ["--stack", "test", "--json"]);
        expect(JSON.parse(r.stdout).hosts[1]).toMatchObject({ reachable: true, error: "its probe answered more than 1048576 bytes" });
    }, 30_000);

    test("refusals name what is missing: no such stack, nothing deployed, an older release, no pulumi, bad arguments", async () => {
        const run = async (pulumi: Parameters<typeof standInClient>[2], args = ["--stack", "nope"]) => {
            const client = standInClient(state, {}, pulumi);
            const r = await status(client.bin, args);
            expect(r.code).toBe(2);
            expect(r.stdout).toBe("");
            return r.stderr.trim();
        };
        expect(await run({ error: "error: no stack named 'nope' found" })).toBe(
            "status: no such stack nope (pulumi: error: no stack named 'nope' found)",
        );
        expect(await run({ outputs: {} })).toBe("status: stack nope has no outputs: nothing is deployed (pulumi up)");
        const older = { ...outputsOf(state) } as Record<string, unknown>;
        delete older.status;
        expect(await run({ outputs: older })).toBe(
            "status: stack nope has no `status` output: deployed by an older release: run pulumi up",
        );
        const partial = outputsOf(state);
        delete (partial.status as unknown as Record<string, unknown>).stateDir;
        expect(await run({ outputs: partial })).toBe("status: the `status` output of stack nope lacks stateDir: run pulumi up");
        expect(await run({ outputs: outputsOf(state) }, ["--stack", "test", "--watch", "--json"])).toBe(
            "status: --json prints one object; it does not go with --watch",
        );
        // stdout is a pipe here, not a terminal
        expect(await run({ outputs: outputsOf(state) }, ["--stack", "test", "--watch"])).toBe(
            "status: --watch redraws a terminal, and stdout is none; --json is for scripts",
        );
        expect(await run({}, ["--stack", "test", "--interval", "0.1"])).toBe("status: --interval 0.1: expected seconds, 0.5 to 3600");
        expect((await run({}, [])).split("\n")[0]).toBe("status: --stack is required");
        // no pulumi at all: PATH holds only what node and the shell need
        const bare = await new Promise<string>((resolve) => {
            const p = spawn(process.execPath, [path.join(ROOT, "setup", "status.js"), "--stack", "x"], {
                cwd: ROOT,
                env: { PATH: "/nonexistent" },
            });
            let err = "";
            p.stderr.on("data", (d) => (err += d));
            p.on("close", () => resolve(err.trim()));
        });
        expect(bare).toBe("status: cannot read the outputs of stack x: pulumi is not on PATH (source setup/env.sh)");
    }, 60_000);
});

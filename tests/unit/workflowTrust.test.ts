/**
 * Who gets which secret, on which runner, behind which approval: the trust model of .github/workflows
 * (docs/gitops.md), read from the workflow files themselves, and setup/gitops/ssh-setup.sh run for real with a
 * throwaway key in a temporary HOME and RUNNER_TEMP.
 *
 *  - A pull request's code (every job of a pull_request workflow) runs on GitHub-hosted runners only, never on the
 *    persistent self-hosted runner, and never with SSH_PRIVATE_KEY.
 *  - A job that references any secret has an environment (its secrets are the environment's, approved by its
 *    reviewers); no secret is handed out at workflow level.
 *  - The deploy key reaches one job: the deploy of main, behind the stack's environment, in one step that keeps it in
 *    the job's own directory (never the runner user's ssh directory), with an always() step that removes it.
 */
import { spawnSync } from "child_process";
import * as fs from "fs";
import * as yaml from "js-yaml";
import * as os from "os";
import * as path from "path";

const ROOT = path.join(__dirname, "..", "..");
const WORKFLOWS = path.join(ROOT, ".github", "workflows");
const SSH_SETUP = path.join(ROOT, "setup", "gitops", "ssh-setup.sh");

type Obj = Record<string, unknown>;
interface Step extends Obj {
    name?: string;
    uses?: string;
    run?: string;
    if?: string;
    env?: Record<string, string>;
}
interface Job extends Obj {
    "runs-on"?: unknown;
    environment?: unknown;
    permissions?: unknown;
    env?: Record<string, string>;
    if?: string;
    steps?: Step[];
}
interface Workflow extends Obj {
    on: unknown;
    env?: Record<string, string>;
    permissions?: unknown;
    jobs: Record<string, Job>;
}

function workflowFiles(): string[] {
    return fs
        .readdirSync(WORKFLOWS)
        .filter((f) => /\.ya?ml$/.test(f))
        .sort();
}

function load(file: string): Workflow {
    return yaml.load(fs.readFileSync(path.join(WORKFLOWS, file), "utf8")) as Workflow;
}

/** The events a workflow runs on, whichever of the three spellings `on:` uses. */
function triggers(wf: Workflow): string[] {
    const on = wf.on;
    if (typeof on === "string") return [on];
    if (Array.isArray(on)) return on.map(String);
    return Object.keys(on as Obj);
}

const PR_EVENTS = ["pull_request", "pull_request_target", "pull_request_review", "pull_request_review_comment"];
const runsPullRequestCode = (wf: Workflow) => triggers(wf).some((t) => PR_EVENTS.includes(t));

/** Every `secrets` context reference in a value (`secrets.X`, `secrets['X']`, `toJSON(secrets)`), and `secrets: inherit`. */
function secretRefs(value: unknown): string[] {
    const text = JSON.stringify(value ?? null);
    const names = [...text.matchAll(/\bsecrets\s*(?:\.\s*([A-Za-z_][A-Za-z0-9_-]*)|\[\s*'([^']+)'\s*\]|\))/g)].map(
        (m) => m[1] ?? m[2] ?? "(all)",
    );
    const job = value as Obj | null;
    if (job && typeof job === "object" && "secrets" in job) names.push("(passed to a reusable workflow)");
    return names.filter((n) => n !== "GITHUB_TOKEN");
}

/** The runner labels a job asks for; a runner group or an expression cannot be told apart from a self-hosted runner. */
function runnerLabels(job: Job): string[] {
    const r = job["runs-on"];
    if (typeof r === "string") return [r];
    if (Array.isArray(r)) return r.map(String);
    if (r && typeof r === "object") return ["(runner group)", ...((r as Obj).labels ? runnerLabels({ "runs-on": (r as Obj).labels }) : [])];
    return ["(none)"];
}
const GITHUB_HOSTED = /^(ubuntu|windows|macos)-[A-Za-z0-9.-]+$/;
const isGithubHosted = (job: Job) => runnerLabels(job).every((l) => GITHUB_HOSTED.test(l));

function environmentName(job: Job): string | undefined {
    const e = job.environment;
    if (typeof e === "string") return e;
    if (e && typeof e === "object") return String((e as Obj).name);
    return undefined;
}

/** Write scopes a job's token gets (its own permissions, else the workflow's). */
function writeScopes(wf: Workflow, job: Job): string[] {
    const p = job.permissions ?? wf.permissions;
    if (p === undefined || p === "write-all") return ["(default or write-all)"];
    if (p === "read-all" || (typeof p === "object" && p !== null && Object.keys(p).length === 0)) return [];
    return Object.entries(p as Obj)
        .filter(([, v]) => v === "write")
        .map(([k]) => k);
}

const stackNames = () =>
    fs
        .readdirSync(path.join(ROOT, "stacks"))
        .map((f) => /^Pulumi\.(.+)\.ya?ml$/.exec(f)?.[1])
        .filter((s): s is string => s !== undefined);

/** `~/.ssh`, `$HOME/.ssh`, `${HOME}/.ssh` in shell text, comments left out. */
function mentionsHomeSsh(shell: string): string[] {
    return shell
        .split("\n")
        .filter((l) => !/^\s*#/.test(l))
        .filter((l) => /(~|\$HOME|\$\{HOME\})\/\.ssh\b/.test(l));
}

describe("workflow trust", () => {
    const files = workflowFiles();
    const all = files.map((f) => ({ file: f, wf: load(f) }));
    const prWorkflows = all.filter(({ wf }) => runsPullRequestCode(wf));
    const deploy = load("deploy.yml");

    test("the workflows are found and pull-request.yml runs on pull requests", () => {
        expect(files).toEqual(expect.arrayContaining(["deploy.yml", "pull-request.yml"]));
        expect(prWorkflows.map((w) => w.file)).toContain("pull-request.yml");
    });

    test("no workflow runs on pull_request_target or workflow_run (they hand the base repository's secrets to whatever runs)", () => {
        for (const { file, wf } of all) {
            expect({ file, triggers: triggers(wf).filter((t) => t === "pull_request_target" || t === "workflow_run") }).toEqual({
                file,
                triggers: [],
            });
        }
    });

    test("no job of a pull-request workflow runs on a self-hosted runner (GitHub-hosted labels only)", () => {
        for (const { file, wf } of prWorkflows) {
            for (const [id, job] of Object.entries(wf.jobs)) {
                expect({ job: `${file}:${id}`, labels: runnerLabels(job), githubHosted: isGithubHosted(job) }).toEqual({
                    job: `${file}:${id}`,
                    labels: runnerLabels(job),
                    githubHosted: true,
                });
            }
        }
    });

    test("no job of a pull-request workflow references SSH_PRIVATE_KEY", () => {
        for (const { file, wf } of prWorkflows) {
            expect({ file, refs: secretRefs(wf).filter((n) => n === "SSH_PRIVATE_KEY" || n === "(all)") }).toEqual({ file, refs: [] });
        }
    });

    test("no workflow hands out a secret at workflow level", () => {
        for (const { file, wf } of all) {
            expect({ file, refs: secretRefs(wf.env ?? {}) }).toEqual({ file, refs: [] });
        }
    });

    test("every job that references a secret has an environment", () => {
        for (const { file, wf } of all) {
            for (const [id, job] of Object.entries(wf.jobs)) {
                if (secretRefs(job).length === 0) continue;
                expect({ job: `${file}:${id}`, environment: environmentName(job) ?? "(none)" }).not.toEqual({
                    job: `${file}:${id}`,
                    environment: "(none)",
                });
            }
        }
    });

    test("a pull request's secrets come from the `preview` environment, which is no stack's environment", () => {
        const stacks = stackNames();
        for (const { file, wf } of prWorkflows) {
            for (const [id, job] of Object.entries(wf.jobs)) {
                if (secretRefs(job).length === 0) continue;
                const env = environmentName(job);
                expect({ job: `${file}:${id}`, env }).toEqual({ job: `${file}:${id}`, env: "preview" });
                expect(stacks).not.toContain(env);
            }
        }
    });

    test("the job with secrets skips a fork's pull request, and its token cannot write", () => {
        for (const { file, wf } of prWorkflows) {
            for (const [id, job] of Object.entries(wf.jobs)) {
                if (secretRefs(job).length === 0) continue;
                expect({ job: `${file}:${id}`, if: job.if }).toEqual({
                    job: `${file}:${id}`,
                    if: expect.stringContaining("github.event.pull_request.head.repo.full_name == github.repository"),
                });
                expect({ job: `${file}:${id}`, write: writeScopes(wf, job) }).toEqual({ job: `${file}:${id}`, write: [] });
            }
        }
    });

    test("a pull-request job whose token can write runs none of the pull request's code and has no secret", () => {
        for (const { file, wf } of prWorkflows) {
            for (const [id, job] of Object.entries(wf.jobs)) {
                if (writeScopes(wf, job).length === 0) continue;
                const steps = job.steps ?? [];
                expect({
                    job: `${file}:${id}`,
                    checkout: steps.filter((s) => s.uses?.startsWith("actions/checkout")).length,
                    run: steps.filter((s) => s.run !== undefined).length,
                    secrets: secretRefs(job),
                }).toEqual({ job: `${file}:${id}`, checkout: 0, run: 0, secrets: [] });
            }
        }
    });

    test("only a deploy of main behind an environment runs on a self-hosted runner", () => {
        for (const { file, wf } of all) {
            for (const [id, job] of Object.entries(wf.jobs)) {
                if (isGithubHosted(job)) continue;
                expect({ job: `${file}:${id}`, on: wf.on, environment: environmentName(job) !== undefined }).toEqual({
                    job: `${file}:${id}`,
                    on: { push: { branches: ["main"] } },
                    environment: true,
                });
            }
        }
    });

    describe("deploy.yml", () => {
        const keyJobs = Object.entries(deploy.jobs).filter(([, job]) => secretRefs(job).includes("SSH_PRIVATE_KEY"));

        test("runs on pushes to main only", () => {
            expect(deploy.on).toEqual({ push: { branches: ["main"] } });
        });

        test("one job gets the deploy key: the stack's deploy, behind the stack's environment, in one step only", () => {
            expect(keyJobs.map(([id]) => id)).toEqual(["up"]);
            const [, job] = keyJobs[0];
            expect(environmentName(job)).toBe("${{ matrix.stack }}");
            expect(secretRefs(job.env ?? {})).not.toContain("SSH_PRIVATE_KEY");
            const keySteps = (job.steps ?? []).filter((s) => secretRefs(s).includes("SSH_PRIVATE_KEY"));
            expect(keySteps).toHaveLength(1);
            expect(keySteps[0].run).toMatch(/bash setup\/gitops\/ssh-setup\.sh bash setup\/gitops\/up\.sh "\$STACK"/);
        });

        test("the key handling writes nothing under ~/.ssh, and an always() step removes the key directory", () => {
            const [, job] = keyJobs[0];
            const steps = job.steps ?? [];
            for (const s of steps) expect({ step: s.name, lines: mentionsHomeSsh(s.run ?? "") }).toEqual({ step: s.name, lines: [] });
            for (const f of fs.readdirSync(path.join(ROOT, "setup", "gitops")).filter((f) => f.endsWith(".sh"))) {
                const text = fs.readFileSync(path.join(ROOT, "setup", "gitops", f), "utf8");
                expect({ file: f, lines: mentionsHomeSsh(text) }).toEqual({ file: f, lines: [] });
            }
            const keyAt = steps.findIndex((s) => secretRefs(s).includes("SSH_PRIVATE_KEY"));
            const cleanup = steps.findIndex(
                (s, i) => i > keyAt && /\balways\(\)/.test(s.if ?? "") && /ssh-setup\.sh --cleanup\b/.test(s.run ?? ""),
            );
            expect(cleanup).toBeGreaterThan(keyAt);
        });
    });
});

describe("setup/gitops/ssh-setup.sh", () => {
    let tmp: string;
    let home: string;
    let runnerTemp: string;
    let key: string;
    let knownHosts: string;

    beforeAll(() => {
        tmp = fs.mkdtempSync(path.join(os.tmpdir(), "vcl-ssh-setup-"));
        const made = spawnSync("ssh-keygen", ["-q", "-t", "ed25519", "-N", "", "-C", "throwaway", "-f", path.join(tmp, "k")]);
        expect(made.status).toBe(0);
        key = fs.readFileSync(path.join(tmp, "k"), "utf8");
        knownHosts = `10.0.0.1 ${fs.readFileSync(path.join(tmp, "k.pub"), "utf8").split(" ").slice(0, 2).join(" ")}\n`;
    });
    afterAll(() => fs.rmSync(tmp, { recursive: true, force: true }));

    beforeEach(() => {
        const run = fs.mkdtempSync(path.join(tmp, "run-"));
        home = path.join(run, "home");
        runnerTemp = path.join(run, "runner-temp");
        fs.mkdirSync(home);
        fs.mkdirSync(runnerTemp);
    });

    /** Runs the script with only the environment a CI step gives it (nothing inherited from the test's own). */
    function setup(args: string[], env: Record<string, string | undefined> = {}) {
        const base: Record<string, string | undefined> = {
            PATH: process.env.PATH,
            HOME: home,
            RUNNER_TEMP: runnerTemp,
            SSH_PRIVATE_KEY: key,
            SSH_KNOWN_HOSTS: knownHosts,
        };
        const merged = Object.fromEntries(Object.entries({ ...base, ...env }).filter((e): e is [string, string] => e[1] !== undefined));
        const r = spawnSync("bash", [SSH_SETUP, ...args], { env: merged, encoding: "utf8" });
        return { status: r.status, out: `${r.stdout}${r.stderr}` };
    }
    const keyDir = () => path.join(runnerTemp, "vllm-cluster-ssh");
    const keyBody = () => key.split("\n")[1];
    const mode = (p: string) => (fs.statSync(p).mode & 0o777).toString(8);

    /** A command that reports what it sees of the key directory into `report/`, outside it. */
    function inspector(): { cmd: string[]; report: string } {
        const report = path.join(path.dirname(runnerTemp), "report");
        fs.mkdirSync(report);
        const script = [
            "set -eu",
            'r="$1"',
            'printf %s "$GITOPS_SSH_DIR" >"$r/dir"',
            'stat -c "%a" "$GITOPS_SSH_DIR" "$GITOPS_SSH_DIR/deploy_key" "$GITOPS_SSH_DIR/known_hosts" >"$r/modes"',
            'cp "$GITOPS_SSH_DIR/deploy_key" "$r/key"',
            'cp "$GITOPS_SSH_DIR/known_hosts" "$r/known_hosts"',
            'printf %s "${SSH_PRIVATE_KEY-unset}" >"$r/key-env"',
            'if [ -e "$HOME/.ssh" ]; then echo yes; else echo no; fi >"$r/home-ssh"',
        ].join("\n");
        return { cmd: ["bash", "-c", script, "inspector", report], report };
    }

    test("runs the command with the key and known_hosts in RUNNER_TEMP (modes 700/600/600), then removes them", () => {
        const { cmd, report } = inspector();
        const r = setup(cmd);
        expect(r.status).toBe(0);
        const read = (f: string) => fs.readFileSync(path.join(report, f), "utf8");
        expect(read("dir")).toBe(keyDir());
        expect(read("modes").split("\n").filter(Boolean)).toEqual(["700", "600", "600"]);
        expect(read("key")).toBe(`${key.replace(/\n+$/, "")}\n`);
        expect(read("known_hosts")).toBe(`${knownHosts.replace(/\n+$/, "")}\n`);
        expect(read("key-env")).toBe("unset");
        expect(read("home-ssh").trim()).toBe("no");
        expect(fs.existsSync(keyDir())).toBe(false);
        expect(fs.existsSync(path.join(home, ".ssh"))).toBe(false);
        expect(fs.readdirSync(home)).toEqual([]);
        expect(r.out).not.toContain(keyBody());
    });

    test("leaves an existing ~/.ssh exactly as it was", () => {
        const ssh = path.join(home, ".ssh");
        fs.mkdirSync(ssh, { mode: 0o700 });
        fs.writeFileSync(path.join(ssh, "id_ed25519"), "the runner's own key\n", { mode: 0o600 });
        fs.writeFileSync(path.join(ssh, "known_hosts"), "example.org ssh-ed25519 AAAA\n", { mode: 0o600 });
        const snapshot = () => fs.readdirSync(ssh).map((f) => [f, fs.readFileSync(path.join(ssh, f), "utf8"), mode(path.join(ssh, f))]);
        const before = snapshot();
        expect(setup(["true"]).status).toBe(0);
        expect(snapshot()).toEqual(before);
    });

    test("a failing command: its exit code is kept and the key directory is still removed", () => {
        const r = setup(["bash", "-c", 'test -f "$GITOPS_SSH_DIR/deploy_key" && exit 7']);
        expect(r.status).toBe(7);
        expect(fs.existsSync(keyDir())).toBe(false);
    });

    test("--cleanup removes a directory left by a job killed before its own cleanup", () => {
        fs.mkdirSync(keyDir(), { mode: 0o700 });
        fs.writeFileSync(path.join(keyDir(), "deploy_key"), key, { mode: 0o600 });
        const r = setup(["--cleanup"], { SSH_PRIVATE_KEY: undefined, SSH_KNOWN_HOSTS: undefined });
        expect(r.status).toBe(0);
        expect(fs.existsSync(keyDir())).toBe(false);
        expect(fs.readdirSync(runnerTemp)).toEqual([]);
    });

    test("a directory left by a killed job is replaced, never reused", () => {
        fs.mkdirSync(keyDir(), { mode: 0o755 });
        fs.writeFileSync(path.join(keyDir(), "stale"), "x");
        const { cmd, report } = inspector();
        expect(setup(cmd).status).toBe(0);
        expect(fs.readFileSync(path.join(report, "modes"), "utf8").split("\n")[0]).toBe("700");
        expect(fs.existsSync(keyDir())).toBe(false);
    });

    test("refuses without RUNNER_TEMP, without the key, or with an unusable key, leaving nothing behind", () => {
        const marker = path.join(path.dirname(runnerTemp), "ran");
        const cmd = ["touch", marker];
        const cases: [Record<string, string | undefined>, RegExp][] = [
            [{ RUNNER_TEMP: undefined }, /RUNNER_TEMP is not set/],
            [{ SSH_PRIVATE_KEY: undefined }, /SSH_PRIVATE_KEY is not set/],
            [{ SSH_KNOWN_HOSTS: "# no host key here\n" }, /no host key line/],
            [{ SSH_PRIVATE_KEY: "not a key" }, /not an OpenSSH private key/],
        ];
        for (const [env, message] of cases) {
            const r = setup(cmd, env);
            expect({ env, status: r.status, message: message.test(r.out) }).toEqual({ env, status: 1, message: true });
            expect(fs.existsSync(marker)).toBe(false);
            expect(fs.readdirSync(runnerTemp)).toEqual([]);
            expect(fs.readdirSync(home)).toEqual([]);
        }
        expect(setup([]).status).toBe(64);
    });
});

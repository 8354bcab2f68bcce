/**
 * The real Pulumi engine for the integration tests, through Pulumi's Automation API (which drives the `pulumi` CLI
 * that setup/env.sh puts on PATH): a private copy of the project per test file, so stack config edits and stack
 * files never touch the repository, and a throwaway file backend.
 */
import { EngineEvent, LocalWorkspace, OpType, Stack } from "@pulumi/pulumi/automation";
import { spawn, spawnSync } from "child_process";
import * as fs from "fs";
import * as os from "os";
import * as path from "path";
import { Kind, record } from "../lib/ledger";

// eslint-disable-next-line @typescript-eslint/no-require-imports
const yaml = require("js-yaml") as { load(s: string): unknown; dump(o: unknown, opts?: unknown): string };

const ROOT = path.join(__dirname, "..", "..");
/** The local stacks' documented passphrase; their stack files carry its encryption salt. */
export const LOCAL_PASSPHRASE = "vllm-cluster-local-simulated-only";

export interface Project {
    dir: string;
    stackName: string;
    stackFile: string;
    stack: Stack;
    /** Engine log lines of the last operation (for failure messages). */
    lastOutput: string[];
}

/** What `pulumi` needs to run the program: the files and folders openProject copies. */
const PROGRAM_FILES = ["Pulumi.yaml", "package.json", "tsconfig.json"];
const PROGRAM_DIRS = ["infra", "components", "stacks"];

/** A program copy's npm packages (the checkout's) and its own empty file backend (`<dir>/.state`). */
function withPackagesAndBackend(dir: string): void {
    fs.symlinkSync(path.join(ROOT, "node_modules"), path.join(dir, "node_modules"));
    fs.mkdirSync(path.join(dir, ".state"));
}

/**
 * Copies what `pulumi` needs to run the program (not the tests) into a temp dir and opens the stack there;
 * `stackFile`, when given, becomes the copy's stack file first (a stack file not in the repository).
 */
export async function openProject(stackName: string, prefix = "vcl-it-", stackFile?: string): Promise<Project> {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), prefix));
    for (const f of PROGRAM_FILES) {
        fs.copyFileSync(path.join(ROOT, f), path.join(dir, f));
    }
    for (const d of PROGRAM_DIRS) {
        fs.cpSync(path.join(ROOT, d), path.join(dir, d), { recursive: true });
    }
    withPackagesAndBackend(dir);
    if (stackFile !== undefined) {
        fs.copyFileSync(stackFile, path.join(dir, "stacks", `Pulumi.${stackName}.yaml`));
    }
    const hosts = process.env.VCL_IT_HOSTS;
    if (hosts) relocate(path.join(dir, "stacks", `Pulumi.${stackName}.yaml`), hosts);
    return openStack(dir, stackName);
}

/**
 * Moves a project copy's stack onto other simulated hosts: node i's management and fabric addresses become those of
 * testbed host `hosts[i]` ("3,4": spark-1's settings on host 3, spark-2's on host 4), and its state directory on
 * the hosts gets their numbers (the simulated hosts share one file system, so another stack's files stay apart).
 * The node names stay, so what the tests expect a message to name is unchanged. npm test runs the files that deploy a
 * cluster of their own this way on hosts 3 and 4 while the backend-ray file runs on 1 and 2 (tests/integration/run.sh
 * side).
 */
export function relocate(stackFile: string, hosts: string): void {
    const numbers = hosts.split(",").map((h) => {
        if (!/^[1-9]\d*$/.test(h.trim())) throw new Error(`VCL_IT_HOSTS: "${hosts}" is not a list of testbed host numbers (e.g. 3,4)`);
        return Number(h);
    });
    const doc = yaml.load(fs.readFileSync(stackFile, "utf8")) as { config: Record<string, unknown> };
    const nodes = doc.config["vllm-cluster:nodes"] as { name: string; sshHost: string; fabricIp: string }[];
    if (nodes.length > numbers.length) throw new Error(`VCL_IT_HOSTS: ${numbers.length} host(s) for ${nodes.length} nodes`);
    nodes.forEach((n, i) => {
        for (const [key, net] of [
            ["sshHost", "10.231.0."],
            ["fabricIp", "10.232.0."],
        ] as const) {
            if (!n[key].startsWith(net)) throw new Error(`relocate: node ${n.name}'s ${key} ${n[key]} is not a simulated host's`);
            n[key] = `${net}${10 + numbers[i]}`;
        }
    });
    const stateDir = (doc.config["vllm-cluster:stateDir"] as string | undefined) ?? "/var/lib/vllm-cluster";
    doc.config["vllm-cluster:stateDir"] = `${stateDir}-h${numbers.join("-h")}`;
    fs.writeFileSync(stackFile, yaml.dump(doc, { lineWidth: 200 }));
}

/** What every CLI run on a project copy gets: its file backend (`<dir>/.state`), the passphrase, offline settings. */
export function engineEnv(dir: string): Record<string, string> {
    return {
        PULUMI_BACKEND_URL: `file://${path.join(dir, ".state")}`,
        PULUMI_CONFIG_PASSPHRASE: LOCAL_PASSPHRASE,
        PULUMI_SKIP_UPDATE_CHECK: "true",
        PULUMI_DISABLE_AUTOMATIC_PLUGIN_ACQUISITION: "true",
        PULUMI_IGNORE_AMBIENT_PLUGINS: "true",
    };
}

/**
 * Opens `stackName` in a project copy that openProject made (this test file's or one handed over), or in another
 * program's folder; `envVars` (engineEnv's and more) go to every CLI run.
 */
export async function openStack(dir: string, stackName: string, envVars: Record<string, string> = engineEnv(dir)): Promise<Project> {
    const stack = await LocalWorkspace.createOrSelectStack({ stackName, workDir: dir }, { envVars });
    return { dir, stackName, stackFile: path.join(dir, "stacks", `Pulumi.${stackName}.yaml`), stack, lastOutput: [] };
}

/**
 * openProject, but with the program as the repository's commit `commit` had it (an earlier release, for the upgrade
 * tests): `git archive` of that commit's program files, the checkout's npm packages. Throws naming the commit when
 * this clone does not have it (a shallow clone).
 */
export async function openProjectAt(commit: string, stackName: string, prefix = "vcl-it-"): Promise<Project> {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), prefix));
    const got = spawnSync("git", ["-C", ROOT, "archive", "--format=tar", commit, ...PROGRAM_FILES, ...PROGRAM_DIRS], {
        maxBuffer: 1 << 30,
    });
    if (got.status !== 0) {
        throw new Error(
            `the program at ${commit} is not in this clone (git archive: ${String(got.stderr).trim()}); a shallow clone lacks it`,
        );
    }
    const untar = spawnSync("tar", ["-x", "-C", dir], { input: got.stdout });
    if (untar.status !== 0) throw new Error(`unpacking the program at ${commit}: ${String(untar.stderr).trim()}`);
    withPackagesAndBackend(dir);
    return openStack(dir, stackName);
}

/** Replaces a project copy's program (not its stack files or state) with the checkout's: the upgrade. */
export function upgradeProgram(p: Project): void {
    for (const f of PROGRAM_FILES) fs.copyFileSync(path.join(ROOT, f), path.join(p.dir, f));
    for (const d of ["infra", "components"]) {
        fs.rmSync(path.join(p.dir, d), { recursive: true, force: true });
        fs.cpSync(path.join(ROOT, d), path.join(p.dir, d), { recursive: true });
    }
}

export function removeProject(p: Project): void {
    fs.rmSync(p.dir, { recursive: true, force: true });
}

/** Reads the project copy's stack config (`vllm-cluster:` keys without the namespace), lets `edit` change it. */
export function editConfig(p: Project, edit: (cfg: Record<string, unknown>) => void): void {
    const doc = yaml.load(fs.readFileSync(p.stackFile, "utf8")) as { config: Record<string, unknown> };
    const cfg: Record<string, unknown> = {};
    for (const [k, v] of Object.entries(doc.config)) {
        cfg[k.replace(/^vllm-cluster:/, "")] = v;
    }
    edit(cfg);
    doc.config = Object.fromEntries(Object.entries(cfg).map(([k, v]) => [`vllm-cluster:${k}`, v]));
    fs.writeFileSync(p.stackFile, yaml.dump(doc, { lineWidth: 200 }));
}

/**
 * The stack without its `monitoring` section: for the files whose cluster is not about monitoring (the `local`
 * stack sets it for the demo and the backend-ray file, which tests it), so their ups do not spend time on it, and
 * those on hosts 3 and 4 (which hold no monitoring image) can run.
 */
export function withoutMonitoring(p: Project): void {
    editConfig(p, (c) => delete c.monitoring);
}

/** What one engine operation did: the step per resource (by logical name), outputs, time, and the log. */
export interface OpResult {
    ok: boolean;
    /** Logical name -> engine step ("create", "same", "replace", "update", "delete", "refresh", ...). */
    ops: Record<string, OpType>;
    /** Logical name -> properties whose change forced a replacement or update (from the step's diff). */
    diffs: Record<string, string[]>;
    outputs: Record<string, unknown>;
    seconds: number;
    output: string;
    error?: string;
    /** The engine's events, each with the time it arrived (`receivedMs`), for setup/timeline.py. */
    events: (EngineEvent & { receivedMs: number })[];
}

const nameOf = (urn: string) => urn.split("::").pop() ?? urn;

interface Collector {
    onEvent: (e: EngineEvent) => void;
    ops: Record<string, OpType>;
    diffs: Record<string, string[]>;
    events: OpResult["events"];
}

function collector(): Collector {
    const ops: Record<string, OpType> = {};
    const diffs: Record<string, string[]> = {};
    const events: OpResult["events"] = [];
    return {
        ops,
        diffs,
        events,
        onEvent: (e: EngineEvent) => {
            events.push({ ...e, receivedMs: Date.now() });
            const m = e.resOutputsEvent?.metadata ?? e.resourcePreEvent?.metadata;
            // The stack and the providers are plumbing: the default dynamic provider, for one, takes the whole
            // stack config as input and shows an update on every config change without touching a resource.
            if (!m || m.type === "pulumi:pulumi:Stack" || m.type.startsWith("pulumi:providers:") || m.op === "refresh") {
                return;
            }
            const name = nameOf(m.urn);
            // a replacement shows as create-replacement + delete-replaced (or replace): keep the strongest
            const strength = (op?: string) => ["same", "read", "update", "create", "delete", "replace"].indexOf(op ?? "");
            const op: OpType = /replace/.test(m.op) ? "replace" : m.op;
            if (strength(op) >= strength(ops[name])) {
                ops[name] = op;
            }
            if (m.diffs && m.diffs.length > 0) {
                diffs[name] = [...new Set([...(diffs[name] ?? []), ...m.diffs])].sort();
            }
        },
    };
}

/**
 * What every engine operation and CLI run of this test file printed and logged (events), in order: a file that
 * hands its stack over (handoff.ts) hands this on, so the fault suite's secret scan reads the whole history.
 */
export const transcript: string[] = [];

function recorded(r: OpResult): OpResult {
    transcript.push(r.output, r.error ?? "", JSON.stringify(r.events));
    recordWaits(r.events);
    return r;
}

/** The ledger's kind for an engine operation by its CLI verb. */
function opKind(verb: string): Kind {
    const kinds: Record<string, Kind> = {
        up: "pulumi up",
        preview: "pulumi preview",
        refresh: "pulumi refresh",
        destroy: "pulumi destroy",
    };
    return kinds[verb] ?? "pulumi cli (other)";
}

/**
 * Into the ledger: how long the engine waited inside an operation for vLLM to answer (the serve readiness checks)
 * and for Ray to form (the cluster gate), each from its resource's first event to its outputs or its failure.
 */
function recordWaits(
    events: {
        receivedMs?: number;
        resourcePreEvent?: EngineEvent["resourcePreEvent"];
        resOutputsEvent?: EngineEvent["resOutputsEvent"];
        resOpFailedEvent?: EngineEvent["resOpFailedEvent"];
    }[],
): void {
    const started = new Map<string, number>();
    for (const e of events) {
        const at = e.receivedMs;
        if (at === undefined) continue;
        const pre = e.resourcePreEvent?.metadata;
        const end = e.resOutputsEvent?.metadata ?? e.resOpFailedEvent?.metadata;
        if (pre && pre.op !== "refresh" && !started.has(pre.urn)) started.set(pre.urn, at);
        if (end && started.has(end.urn)) {
            const name = nameOf(end.urn);
            const kind: Kind | undefined = /readiness$/.test(name)
                ? "waiting for vLLM (serve readiness)"
                : /(cluster-ready|gate)[^:]*probe$|-probe$/.test(name)
                  ? "waiting for Ray (cluster gate)"
                  : undefined;
            if (kind) record(kind, (at - started.get(end.urn)!) / 1000);
            started.delete(end.urn);
        }
    }
}

async function run(
    p: Project,
    what: string,
    f: (c: Collector, onOutput: (s: string) => void) => Promise<{ outputs?: Record<string, { value: unknown }> }>,
): Promise<OpResult> {
    const c = collector();
    const lines: string[] = [];
    const t0 = Date.now();
    const kind = opKind(what.replace(/^pulumi /, ""));
    try {
        const r = await f(c, (s) => lines.push(s));
        const outputs = Object.fromEntries(Object.entries(r.outputs ?? {}).map(([k, v]) => [k, v.value]));
        p.lastOutput = lines;
        record(kind, (Date.now() - t0) / 1000);
        return recorded({
            ok: true,
            ops: c.ops,
            diffs: c.diffs,
            events: c.events,
            outputs,
            seconds: (Date.now() - t0) / 1000,
            output: lines.join(""),
        });
    } catch (e) {
        p.lastOutput = lines;
        record(kind, (Date.now() - t0) / 1000);
        const error = e instanceof Error ? e.message : String(e);
        return recorded({
            ok: false,
            ops: c.ops,
            diffs: c.diffs,
            events: c.events,
            outputs: {},
            seconds: (Date.now() - t0) / 1000,
            output: lines.join(""),
            error: `${what}: ${error}`,
        });
    }
}

export interface UpOptions {
    refresh?: boolean;
    replace?: string[];
    expectNoChanges?: boolean;
    /** Called with a resource's logical name each time the engine has its new version in place, in order. */
    onStep?: (name: string) => void;
}

export function up(p: Project, opts: UpOptions = {}): Promise<OpResult> {
    const { onStep, ...upOpts } = opts;
    return run(p, "pulumi up", (c, onOutput) =>
        p.stack.up({
            ...upOpts,
            onEvent: (e) => {
                c.onEvent(e);
                const m = e.resOutputsEvent?.metadata;
                // the new resource is in place: created, replacement created, or updated
                if (m && onStep && ["create", "create-replacement", "update"].includes(m.op)) {
                    onStep(nameOf(m.urn));
                }
            },
            onOutput,
            color: "never",
            suppressProgress: true,
        }),
    );
}

export function preview(p: Project, opts: { diff?: boolean; expectNoChanges?: boolean; refresh?: boolean } = {}): Promise<OpResult> {
    return run(p, "pulumi preview", async (c, onOutput) => {
        await p.stack.preview({ ...opts, onEvent: c.onEvent, onOutput, color: "never" });
        return {};
    });
}

export function refresh(p: Project): Promise<OpResult> {
    return run(p, "pulumi refresh", async (c, onOutput) => {
        await p.stack.refresh({ onEvent: c.onEvent, onOutput, color: "never" });
        return {};
    });
}

export function destroy(p: Project): Promise<OpResult> {
    return run(p, "pulumi destroy", async (c, onOutput) => {
        await p.stack.destroy({ onEvent: c.onEvent, onOutput, color: "never" });
        return {};
    });
}

/** Resources in the stack's state (custom resources only: no stack, no providers, no components). */
export async function stateResources(p: Project): Promise<{ type: string; name: string; id?: string; outputs: Record<string, unknown> }[]> {
    const d = await p.stack.exportStack();
    const resources = (d.deployment.resources ?? []) as {
        type: string;
        urn: string;
        id?: string;
        custom?: boolean;
        outputs?: Record<string, unknown>;
    }[];
    return resources
        .filter((r) => r.custom && !r.type.startsWith("pulumi:"))
        .map((r) => ({ type: r.type, name: nameOf(r.urn), id: r.id, outputs: r.outputs ?? {} }));
}

/** `pulumi stack export` as an operator runs it (no --show-secrets; the Automation API's export decrypts). */
export async function cliExport(p: Project): Promise<string> {
    const env = { ...process.env, ...p.stack.workspace.envVars };
    // a state with dynamic resources (each carries its serialized provider) and aliases passes spawnSync's default
    // 1 MiB output limit, which kills the CLI (exit null) rather than failing
    const r = spawnSync("pulumi", ["stack", "export", "--stack", p.stackName, "--cwd", p.dir], {
        env,
        encoding: "utf8",
        timeout: 120_000,
        maxBuffer: 256 * 1024 * 1024,
    });
    if (r.status !== 0) {
        throw new Error(`pulumi stack export failed (exit ${r.status}${r.error ? `, ${r.error.message}` : ""}): ${r.stderr}`);
    }
    return r.stdout;
}

/** Throws with the operation's error and the tail of the engine's log. */
export function expectOk(r: OpResult): OpResult {
    if (!r.ok) {
        throw new Error(`${r.error}\n--- engine output (tail):\n${r.output.split("\n").slice(-40).join("\n")}`);
    }
    return r;
}

/** The engine steps that are not "same", sorted: what an operation changed. */
export function changed(r: OpResult): string[] {
    return Object.entries(r.ops)
        .filter(([, op]) => op !== "same" && op !== "read")
        .map(([n, op]) => `${op} ${n}`)
        .sort();
}

/** Writes an operation's events as JSON lines, the format of `pulumi up --event-log` (plus `receivedMs`). */
export function writeEvents(r: OpResult, file: string): void {
    fs.writeFileSync(file, r.events.map((e) => JSON.stringify(e)).join("\n") + "\n");
}

/** What one `pulumi` CLI run did: how it ended, its stdout and stderr (interleaved as they came), its time. */
export interface CliResult {
    code: number | null;
    signal: NodeJS.Signals | null;
    output: string;
    seconds: number;
}

/** A `pulumi` CLI process the test can signal, and the engine events it has written so far. */
export interface CliRun {
    pid: number;
    /** The engine events in its --event-log file so far, in order (up, refresh, destroy and preview write one). */
    events(): EngineEvent[];
    /** The raw text of its --event-log file so far. */
    eventLog(): string;
    running(): boolean;
    kill(signal: NodeJS.Signals): void;
    done: Promise<CliResult>;
}

/**
 * Starts `pulumi <args>` on the project's stack with what the Automation API gives it (working directory,
 * environment, backend, passphrase), but as the test's own child process, so that a test can interrupt it with a
 * signal as an operator or a CI runner would. Never rejects; a run past `timeoutMs` is killed (SIGKILL).
 */
export function startCli(p: Project, args: string[], timeoutMs = 900_000): CliRun {
    const eventFile = ["up", "refresh", "destroy", "preview"].includes(args[0])
        ? path.join(p.dir, `.events-${args[0]}-${Date.now()}.jsonl`)
        : undefined;
    const argv = [
        ...args,
        ...(eventFile ? ["--event-log", eventFile] : []),
        "--stack",
        p.stackName,
        "--non-interactive",
        "--color",
        "never",
    ];
    const t0 = Date.now();
    const child = spawn("pulumi", argv, {
        cwd: p.dir,
        // --event-log is registered only with PULUMI_DEBUG_COMMANDS (the Automation API sets it too)
        env: { ...process.env, ...p.stack.workspace.envVars, PULUMI_DEBUG_COMMANDS: "true" },
        stdio: ["ignore", "pipe", "pipe"],
    });
    let output = "";
    let exited = false;
    child.stdout.on("data", (d: Buffer) => (output += d.toString()));
    child.stderr.on("data", (d: Buffer) => (output += d.toString()));
    const done = new Promise<CliResult>((resolve) => {
        const timer = setTimeout(() => {
            output += `\n(pulumi ${args[0]}: no exit within ${Math.round(timeoutMs / 1000)} s: killed)\n`;
            child.kill("SIGKILL");
        }, timeoutMs);
        const end = (code: number | null, signal: NodeJS.Signals | null) => {
            clearTimeout(timer);
            exited = true;
            transcript.push(output, eventLog());
            record(opKind(args[0]), (Date.now() - t0) / 1000);
            recordWaits(
                eventLog()
                    .split("\n")
                    .flatMap((l) => {
                        try {
                            const e = JSON.parse(l) as EngineEvent & { timestamp?: number };
                            return [{ ...e, receivedMs: (e.timestamp ?? 0) * 1000 }];
                        } catch {
                            return [];
                        }
                    }),
            );
            resolve({ code, signal, output, seconds: (Date.now() - t0) / 1000 });
        };
        child.on("error", (e) => {
            output += `\ncannot run pulumi: ${e.message}\n`;
            end(null, null);
        });
        child.on("close", end);
    });
    const eventLog = () => (eventFile && fs.existsSync(eventFile) ? fs.readFileSync(eventFile, "utf8") : "");
    return {
        pid: child.pid ?? -1,
        eventLog,
        // the last piece is an unfinished line (or empty): only whole lines are events
        events: () =>
            eventLog()
                .split("\n")
                .slice(0, -1)
                .flatMap((l) => {
                    try {
                        return [JSON.parse(l) as EngineEvent];
                    } catch {
                        return [];
                    }
                }),
        running: () => !exited,
        kill: (signal) => {
            if (!exited) child.kill(signal);
        },
        done,
    };
}

/** Runs `pulumi <args>` on the project's stack (see startCli) to its end. */
export function cli(p: Project, args: string[], timeoutMs = 900_000): Promise<CliResult> {
    return startCli(p, args, timeoutMs).done;
}

/** How long one resource's step took in an operation: from its pre-event to its outputs, in seconds (0: no step). */
export function stepSeconds(r: OpResult, name: string): number {
    const at = (pick: (e: EngineEvent) => { urn?: string } | undefined) =>
        r.events.find((e) => pick(e)?.urn?.endsWith(`::${name}`))?.receivedMs;
    const start = at((e) => e.resourcePreEvent?.metadata);
    const end = at((e) => e.resOutputsEvent?.metadata);
    return start !== undefined && end !== undefined ? Math.round((end - start) / 100) / 10 : 0;
}

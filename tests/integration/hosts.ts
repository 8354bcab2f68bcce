/**
 * Talking to the simulated hosts from the integration tests the way an operator would: the system ssh with the
 * stack's key and known_hosts (host keys verified), `docker` on the host, bounded polls. Every wait has a bound
 * and an error that says what it waited for.
 */
import { spawn } from "child_process";
import * as fs from "fs";
import * as os from "os";
import * as path from "path";
import { record, timed } from "../lib/ledger";
import { shellQuote } from "../../infra/builders/quote";
import { SshTarget, sshArgv, sshTargetOf } from "../../infra/builders/ssh";
import { LABEL } from "../../infra/contract";
import { ClusterConfig, NodeConfig, validateConfig } from "../../infra/config";

// eslint-disable-next-line @typescript-eslint/no-require-imports
const yaml = require("js-yaml") as { load(s: string): unknown };

/** A stack file's validated config (the program's own validation). */
export function stackConfig(file: string): ClusterConfig {
    const doc = yaml.load(fs.readFileSync(file, "utf8")) as { config: Record<string, unknown> };
    return validateConfig(Object.fromEntries(Object.entries(doc.config).map(([k, v]) => [k.replace(/^vllm-cluster:/, ""), v])));
}

export interface RunResult {
    code: number;
    stdout: string;
    stderr: string;
}

/** Runs argv (no shell), bounded; never throws for a non-zero exit. */
export function runArgv(argv: string[], opts: { timeoutMs?: number; input?: string } = {}): Promise<RunResult> {
    return timed("commands run by the tests (ssh, docker, scripts)", () => runArgvUntimed(argv, opts));
}

function runArgvUntimed(argv: string[], opts: { timeoutMs?: number; input?: string }): Promise<RunResult> {
    return new Promise((resolve, reject) => {
        const child = spawn(argv[0], argv.slice(1), { stdio: ["pipe", "pipe", "pipe"] });
        let stdout = "";
        let stderr = "";
        const timeoutMs = opts.timeoutMs ?? 60_000;
        const timer = setTimeout(() => {
            child.kill("SIGKILL");
            reject(new Error(`${argv.slice(0, 3).join(" ")} ...: no exit within ${timeoutMs} ms`));
        }, timeoutMs);
        child.stdout.on("data", (d: Buffer) => (stdout += d.toString()));
        child.stderr.on("data", (d: Buffer) => (stderr += d.toString()));
        child.on("error", (e) => {
            clearTimeout(timer);
            reject(e);
        });
        child.on("close", (code) => {
            clearTimeout(timer);
            resolve({ code: code ?? -1, stdout, stderr });
        });
        // a command that exits before reading its stdin closes the pipe: that is not an error of the command
        child.stdin.on("error", () => undefined);
        child.stdin.end(opts.input ?? "");
    });
}

export class Hosts {
    constructor(public readonly cfg: ClusterConfig) {}

    node(name: string): NodeConfig {
        const n = this.cfg.nodes.find((x) => x.name === name);
        if (!n) {
            throw new Error(`no node ${name} in the stack config`);
        }
        return n;
    }

    target(name: string): SshTarget {
        return sshTargetOf(this.node(name), this.cfg.ssh);
    }

    /** Runs argv on the node over ssh (host key verified). */
    on(name: string, argv: string[], timeoutMs = 60_000): Promise<RunResult> {
        return runArgv(sshArgv(this.target(name), argv), { timeoutMs });
    }

    /** Like `on`, but throws naming the command and node on a non-zero exit; resolves with stdout. */
    async must(name: string, argv: string[], timeoutMs = 60_000): Promise<string> {
        const r = await this.on(name, argv, timeoutMs);
        if (r.code !== 0) {
            throw new Error(`${argv.join(" ")} on ${name} failed (exit ${r.code}): ${r.stderr.trim()}`);
        }
        return r.stdout;
    }

    docker(name: string, args: string[], timeoutMs = 60_000): Promise<RunResult> {
        return this.on(name, ["docker", ...args], timeoutMs);
    }

    /** ID of the named container on the node, or "" when there is none. */
    async containerId(name: string, container: string): Promise<string> {
        const r = await this.docker(name, ["container", "inspect", "--format", "{{.Id}}", container]);
        return r.code === 0 ? r.stdout.trim() : "";
    }

    /** `docker inspect --format` of a container; throws when it does not exist. */
    async inspect(name: string, container: string, format: string): Promise<string> {
        const r = await this.docker(name, ["container", "inspect", "--format", format, container]);
        if (r.code !== 0) {
            throw new Error(`docker inspect ${container} on ${name}: ${r.stderr.trim()}`);
        }
        return r.stdout.trim();
    }

    /** Removes every container of any project stack from the node (the stacks share container names). */
    async removeProjectContainers(name: string): Promise<void> {
        await this.on(
            name,
            ["sh", "-c", "docker rm -f $(docker ps -aq --filter label=vllm-cluster.managed=true) 2>/dev/null; true"],
            120_000,
        );
    }

    /** The project's containers of `stack` on the node (any state), as "name state". */
    async projectContainers(name: string, stack: string): Promise<string[]> {
        const r = await this.docker(name, [
            "ps",
            "--all",
            "--filter",
            `label=${LABEL.stack}=${stack}`,
            "--format",
            "{{.Names}} {{.State}}",
        ]);
        if (r.code !== 0) {
            throw new Error(`docker ps on ${name}: ${r.stderr.trim()}`);
        }
        return r.stdout.trim().split("\n").filter(Boolean).sort();
    }

    async imageId(name: string, ref: string): Promise<string> {
        const r = await this.docker(name, ["image", "inspect", "--format", "{{.Id}}", ref]);
        return r.code === 0 ? r.stdout.trim() : "";
    }

    /** `sha256sum` of every file of a model directory as the node sees it, links followed, in path order. */
    modelFiles(name: string, dir = this.cfg.model.hostPath): Promise<string> {
        return this.must(name, ["sh", "-c", `cd ${shellQuote(dir)} && find -L . -type f | LC_ALL=C sort | xargs -r sha256sum --`]);
    }
}

/** Polls `cond` every `everyMs` until it is true; throws naming `what` after `timeoutMs`. */
export async function waitFor(what: string, cond: () => Promise<boolean>, timeoutMs: number, everyMs = 1000): Promise<void> {
    const t0 = Date.now();
    const deadline = t0 + timeoutMs;
    for (;;) {
        if (await cond().catch(() => false)) {
            record("test waits (polling)", (Date.now() - t0) / 1000);
            return;
        }
        if (Date.now() > deadline) {
            record("test waits (polling)", (Date.now() - t0) / 1000);
            throw new Error(`${what}: not within ${Math.round(timeoutMs / 1000)} s`);
        }
        await new Promise((r) => setTimeout(r, everyMs));
    }
}

/** Counts `Accepted publickey` lines in each simulated host's sshd log (tests/testbed: LogLevel VERBOSE). */
export function sshdAccepted(testbedDir: string, hosts: string[]): Record<string, number> {
    const out: Record<string, number> = {};
    for (const h of hosts) {
        const f = `${testbedDir}/hosts/${h}/sshd.log`;
        out[h] = fs.existsSync(f) ? (fs.readFileSync(f, "utf8").match(/Accepted publickey/g) ?? []).length : 0;
    }
    return out;
}

/** Where the program's shared ssh connections listen for this user: SHARED_SSH_DIR (infra/builders/ssh.ts) as Node sees it. */
export function sharedSshSocketDir(): string {
    return path.join(process.env.XDG_CACHE_HOME ?? path.join(os.homedir(), ".cache"), "vllm-cluster", "ssh");
}

/** Connections and sessions one simulated host's sshd logged after a point: where it stood before an operation. */
export interface SshdTraffic {
    connections: number;
    sessions: number;
    /** The most sessions any one of those connections carried (1 when none was shared). */
    maxSessionsPerConnection: number;
}

/** The size of each host's sshd log now, to pass to sshdTrafficSince after an operation. */
export function sshdLogMarks(testbedDir: string, hosts: string[]): Record<string, number> {
    return Object.fromEntries(hosts.map((h) => [h, fs.statSync(`${testbedDir}/hosts/${h}/sshd.log`).size]));
}

/** What each host's sshd logged since `marks` (sshdLogMarks): connections accepted and the sessions they carried. */
export function sshdTrafficSince(testbedDir: string, marks: Record<string, number>): Record<string, SshdTraffic> {
    const out: Record<string, SshdTraffic> = {};
    for (const [h, from] of Object.entries(marks)) {
        const log = fs.readFileSync(`${testbedDir}/hosts/${h}/sshd.log`).subarray(from).toString("utf8");
        const perPort = new Map<string, number>();
        for (const m of log.matchAll(/^Starting session: .* port (\d+) id \d+$/gm)) {
            perPort.set(m[1], (perPort.get(m[1]) ?? 0) + 1);
        }
        out[h] = {
            connections: (log.match(/^Accepted publickey/gm) ?? []).length,
            sessions: [...perPort.values()].reduce((a, b) => a + b, 0),
            maxSessionsPerConnection: Math.max(1, ...perPort.values()),
        };
    }
    return out;
}

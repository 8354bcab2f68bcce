/**
 * `npm run status` (setup/status.js) as an operator runs it against the fault suite's stack: the stack's state backend
 * in the environment and no passphrase (the view reads no secret), from the checkout, bounded.
 */
import { spawn } from "child_process";
import * as path from "path";
import type { Project } from "../integration/engine";
import { timed } from "../lib/ledger";

const ROOT = path.join(__dirname, "..", "..");

export interface StatusRun {
    code: number | null;
    stdout: string;
    stderr: string;
    seconds: number;
}

/** The environment of the stack's engine, without its passphrase unless `secrets` (the benchmark reads the API key). */
function viewEnv(p: Project, secrets = false): NodeJS.ProcessEnv {
    const env: NodeJS.ProcessEnv = { ...process.env, ...p.stack.workspace.envVars };
    if (!secrets) {
        delete env.PULUMI_CONFIG_PASSPHRASE;
        delete env.PULUMI_CONFIG_PASSPHRASE_FILE;
    }
    return env;
}

/** When to type Ctrl-C into a run's terminal: once its output satisfies `when`, or after `ms` at the latest. */
interface Interrupt {
    when: (stdout: string) => boolean;
    ms: number;
}

/** Runs `argv` from the checkout with the view's environment, bounded by `timeoutMs`. */
function run(p: Project, argv: string[], timeoutMs: number, stop?: Interrupt, secrets = false): Promise<StatusRun> {
    return timed("commands run by the tests (ssh, docker, scripts)", () => {
        return new Promise<StatusRun>((resolve, reject) => {
            const t0 = Date.now();
            const child = spawn(argv[0], argv.slice(1), { cwd: ROOT, env: viewEnv(p, secrets), stdio: ["pipe", "pipe", "pipe"] });
            // Ctrl-C as typed: the terminal's line discipline makes it SIGINT to the view
            let typed = false;
            const ctrlC = () => {
                if (!typed) child.stdin.write("\x03");
                typed = true;
            };
            child.stdin.on("error", () => undefined);
            let stdout = "";
            let stderr = "";
            child.stdout.on("data", (d: Buffer) => {
                stdout += d.toString();
                if (stop?.when(stdout)) ctrlC();
            });
            child.stderr.on("data", (d: Buffer) => (stderr += d.toString()));
            const interrupt = stop === undefined ? undefined : setTimeout(ctrlC, stop.ms);
            const timer = setTimeout(() => {
                child.kill("SIGKILL");
                reject(new Error(`${argv.join(" ")}: no exit within ${timeoutMs} ms`));
            }, timeoutMs);
            child.on("error", reject);
            child.on("close", (code) => {
                clearTimeout(timer);
                if (interrupt) clearTimeout(interrupt);
                resolve({ code, stdout, stderr, seconds: (Date.now() - t0) / 1000 });
            });
        });
    });
}

/** `npm run status -- --stack <stack> ARGS`, once. */
export function statusView(p: Project, stack: string, args: string[] = []): Promise<StatusRun> {
    return run(p, [process.execPath, "setup/status.js", "--stack", stack, "--cwd", p.dir, ...args], 60_000);
}

/** `npm run bench:serve -- --stack <stack> ARGS` as an operator runs it: with the stack's passphrase (for its API key). */
export function benchServe(p: Project, stack: string, args: string[]): Promise<StatusRun> {
    return run(p, [process.execPath, "setup/benchServe.js", "--stack", stack, "--cwd", p.dir, ...args], 900_000, undefined, true);
}

/** The frames a --watch drew, as the terminal shows each (its control sequences removed; the first clear is none). */
function framesOf(screen: string): string[] {
    return screen
        .split("\x1b[H")
        .map((f) => f.replace(/\x1b\[[0-9;?]*[A-Za-z]/g, "").replace(/\r/g, ""))
        .filter((f) => f.startsWith("vllm-cluster status at "));
}

/**
 * `npm run status -- --watch --interval 1` in a pseudo-terminal of its own (util-linux `script`) until it drew
 * `frames` frames (or `ms` passed), then Ctrl-C; the frames, as the terminal would show each.
 */
export async function statusWatch(p: Project, stack: string, frames: number, ms = 30_000): Promise<{ run: StatusRun; frames: string[] }> {
    const cmd = `exec ${process.execPath} setup/status.js --stack ${stack} --cwd ${p.dir} --watch --interval 1`;
    // each frame ends clearing the rest of the screen; the first clear, before any frame, is none
    const drawn = (out: string) => out.split("\x1b[J").length - 2 >= frames;
    const r = await run(p, ["script", "-qec", cmd, "/dev/null"], ms + 30_000, { when: drawn, ms });
    return { run: r, frames: framesOf(r.stdout) };
}

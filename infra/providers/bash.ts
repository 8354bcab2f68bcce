/** Running a local bash script from a dynamic provider (the scripts reach hosts over ssh themselves). */

export interface BashResult {
    code: number;
    stdout: string;
    /** The last 16 KiB of stderr. */
    stderr: string;
}

/**
 * Runs `script` with bash and the extra environment, `input` on its stdin (else none); resolves with its exit code
 * and output, never rejects.
 */
export function runBash(script: string, env: Record<string, string> = {}, input?: string): Promise<BashResult> {
    // Required here: dynamic provider code is serialized, and built-in modules are re-required on the far side.
    // eslint-disable-next-line @typescript-eslint/no-require-imports
    const cp = require("child_process") as typeof import("child_process");
    return new Promise((resolve) => {
        const child = cp.spawn("bash", ["-c", script], {
            env: { ...process.env, ...env },
            stdio: [input === undefined ? "ignore" : "pipe", "pipe", "pipe"],
        });
        if (input !== undefined) {
            child.stdin!.on("error", () => undefined); // a script that exits early closes its stdin
            child.stdin!.end(input);
        }
        let stdout = "";
        let stderr = "";
        child.stdout!.on("data", (d: Buffer) => (stdout += d.toString()));
        child.stderr!.on("data", (d: Buffer) => {
            stderr = (stderr + d.toString()).slice(-16384);
        });
        child.on("error", (e) => resolve({ code: -1, stdout, stderr: `cannot run bash: ${e.message}` }));
        child.on("close", (code) => resolve({ code: code ?? -1, stdout, stderr }));
    });
}

export function lastLine(s: string): string {
    return s.trim().split("\n").pop()?.trim() ?? "";
}

export function tail(s: string, lines = 15): string {
    return s.trim().split("\n").slice(-lines).join("\n");
}

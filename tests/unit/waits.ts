/** Waiting on processes and files in the unit tests that run scripts as processes (the init, the watchdog). */
import type { ChildProcess } from "child_process";

/** Resolves with the exit status once the process ends. */
export function exited(p: ChildProcess): Promise<number | null> {
    return new Promise((resolve) => p.on("exit", (code) => resolve(code)));
}

/** Polls `f` every 50 ms until it holds (a throw counts as not yet), bounded. */
export async function until(f: () => boolean, what: string, ms = 20_000): Promise<void> {
    const end = Date.now() + ms;
    const holds = () => {
        try {
            return f();
        } catch {
            return false;
        }
    };
    while (!holds()) {
        if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
        await new Promise((r) => setTimeout(r, 50));
    }
}

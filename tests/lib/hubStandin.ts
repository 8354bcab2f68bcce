/** Starts the Hub STAND-IN (tests/testbed/hub_standin.py) for a test: its URL and each repo's commit, and a stop. */
import { spawn } from "child_process";
import * as path from "path";
import * as readline from "readline";

export interface HubStandin {
    url: string;
    commits: Record<string, string>;
    stop(): void;
}

export async function startHubStandin(args: string[]): Promise<HubStandin> {
    const script = path.join(__dirname, "..", "testbed", "hub_standin.py");
    const child = spawn("python3", [script, ...args], { stdio: ["ignore", "pipe", "inherit"], env: { ...process.env } });
    const first = await new Promise<string>((resolve, reject) => {
        readline.createInterface({ input: child.stdout! }).once("line", resolve);
        child.once("exit", (code) => reject(new Error(`the Hub stand-in exited (${code}) before it listened`)));
    });
    const ready = JSON.parse(first) as { url: string; commits: Record<string, string> };
    return { ...ready, stop: () => child.kill() };
}

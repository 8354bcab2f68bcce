/**
 * Where a test file's time goes, for the suite's budget: seconds per kind of work (each engine operation, the time
 * the engine spent waiting for vLLM to answer or for Ray to form, the tests' own polling, CLI runs, ssh commands on
 * the hosts), per test file. The integration, fault and bench files record into it through the shared helpers
 * (tests/integration/engine.ts, hosts.ts); each file's ledger is written to $VCL_RESULTS_DIR/timings/ as it grows,
 * and tests/lib/timings-report.js adds jest's own wall time per file and prints the table.
 */
import * as fs from "fs";
import * as path from "path";

/** The kinds of time the ledger keeps apart (seconds may overlap: a readiness wait is inside a `pulumi up`). */
export type Kind =
    | "pulumi up"
    | "pulumi preview"
    | "pulumi refresh"
    | "pulumi destroy"
    | "pulumi cli (other)"
    | "waiting for vLLM (serve readiness)"
    | "waiting for Ray (cluster gate)"
    | "test waits (polling)"
    | "test sleeps"
    | "commands run by the tests (ssh, docker, scripts)";

/** Per kind: total seconds and how many times. */
export type Ledger = Partial<Record<Kind, { seconds: number; count: number }>>;

function resultsDir(): string {
    return process.env.VCL_RESULTS_DIR ?? path.join(process.env.TMPDIR ?? "/tmp", "vllm-cluster-results");
}

/** The test file running now (jest's own notion), repository-relative; "unknown" outside a test. */
function currentFile(): string {
    const state = (globalThis as { expect?: { getState?: () => { testPath?: string } } }).expect?.getState?.();
    const p = state?.testPath;
    return p ? path.relative(path.join(__dirname, "..", ".."), p) : "unknown";
}

const ledgers = new Map<string, Ledger>();

/** Adds `seconds` of `kind` to the current test file's ledger, and writes the ledger out. */
export function record(kind: Kind, seconds: number): void {
    if (!(seconds >= 0)) return;
    const file = currentFile();
    const l = ledgers.get(file) ?? {};
    const e = l[kind] ?? { seconds: 0, count: 0 };
    l[kind] = { seconds: e.seconds + seconds, count: e.count + 1 };
    ledgers.set(file, l);
    try {
        const dir = path.join(resultsDir(), "timings");
        fs.mkdirSync(dir, { recursive: true });
        fs.writeFileSync(path.join(dir, `${file.replace(/[/\\]/g, "__")}.json`), JSON.stringify({ file, ledger: l }, null, 2));
    } catch {
        // the ledger is a measurement: a results directory that cannot be written never fails a test
    }
}

/** Times `f` as `kind`. */
export async function timed<T>(kind: Kind, f: () => Promise<T>): Promise<T> {
    const t0 = Date.now();
    try {
        return await f();
    } finally {
        record(kind, (Date.now() - t0) / 1000);
    }
}

#!/usr/bin/env node
// @ts-check
/**
 * npm run status -- --stack NAME [--watch [--interval S]] [--json] [--timeout S] [--cwd DIR] [--outputs FILE]
 *
 * The running cluster as its hosts see it, read-only over SSH with the stack's own key and known_hosts: each
 * host's containers (state, uptime, Docker's restarts, the crash budget used, the init's verdict), MemAvailable
 * against the memory floor, free disk at the model path, each init's last verdict; Ray's members on their
 * fabric IPs (or the native ranks); and from vLLM's /metrics what the server is doing. Once, as text or one JSON
 * object (--json), or redrawn in place every S seconds (--watch) until Ctrl-C. A host that does not answer is
 * shown as such; the view goes on.
 */
"use strict";
const { StatusError } = require("./statusError");

/**
 * The probe and the view, loaded once the arguments passed (they transpile the program's TypeScript modules, about 2 s):
 * a wrong argument is refused at once.
 */
/** @type {(typeof import("./statusRun") & typeof import("./statusView")) | undefined} */
let loaded;
const parts = () => (loaded ??= { ...require("./statusRun"), ...require("./statusView") });

const USAGE = `usage: npm run status -- --stack NAME [--watch [--interval S]] [--json] [--timeout S]

  --stack NAME      the stack whose outputs say where to look (read from pulumi stack export: no passphrase, no secret)
  --watch           redraw in place every --interval seconds (default 2) until Ctrl-C; needs a terminal
  --json            one JSON object instead of the view (not with --watch)
  --timeout S       the longest one host may take to answer, seconds (default 10; ssh's connect bound is 5)
  --cwd DIR         the Pulumi project directory (default: the current one)
  --outputs FILE    the outputs as \`pulumi stack output --json\` printed them, instead of asking pulumi`;

/** ANSI: hide and show the cursor, home, clear to the end of the line and of the screen. */
const ESC = { hide: "\x1b[?25l", show: "\x1b[?25h", home: "\x1b[H", eol: "\x1b[K", eos: "\x1b[J" };

/** @param {string[]} argv */
function parseArgs(argv) {
    /** @type {{ stack?: string, cwd?: string, outputs?: string, watch: boolean, json: boolean, interval: number, timeout: number }} */
    const o = { watch: false, json: false, interval: 2, timeout: 10 };
    for (let i = 0; i < argv.length; i++) {
        const a = argv[i];
        const value = () => {
            const v = argv[++i];
            if (v === undefined) throw new StatusError(`${a} needs a value\n\n${USAGE}`);
            return v;
        };
        /** @param {number} min */
        const seconds = (min) => {
            const v = value();
            const n = Number(v);
            if (!/^\d+(\.\d+)?$/.test(v) || n < min || n > 3600) throw new StatusError(`${a} ${v}: expected seconds, ${min} to 3600`);
            return n;
        };
        if (a === "--stack") o.stack = value();
        else if (a === "--cwd") o.cwd = value();
        else if (a === "--outputs") o.outputs = value();
        else if (a === "--watch") o.watch = true;
        else if (a === "--json") o.json = true;
        else if (a === "--interval") o.interval = seconds(0.5);
        else if (a === "--timeout") o.timeout = seconds(1);
        else if (a === "-h" || a === "--help") {
            console.log(USAGE);
            process.exit(0);
        } else throw new StatusError(`unknown argument ${a}\n\n${USAGE}`);
    }
    if (o.stack === undefined && o.outputs === undefined) throw new StatusError(`--stack is required\n\n${USAGE}`);
    if (o.stack !== undefined && !/^[A-Za-z0-9_.\/-]+$/.test(o.stack)) throw new StatusError(`--stack ${o.stack}: not a stack name`);
    if (o.watch && o.json) throw new StatusError("--json prints one object; it does not go with --watch");
    if (o.watch && !process.stdout.isTTY) throw new StatusError("--watch redraws a terminal, and stdout is none; --json is for scripts");
    return o;
}

/** @param {Date} d */
const utc = (d) =>
    d
        .toISOString()
        .replace("T", " ")
        .replace(/\.\d+Z$/, " UTC");

/** @param {ReturnType<typeof parseArgs>} o */
async function once(o) {
    const { readOutputs, refresh, render } = parts();
    const outputs = readOutputs(o);
    const r = await refresh(outputs, { timeoutMs: o.timeout * 1000 });
    const at = new Date();
    if (o.json) {
        process.stdout.write(JSON.stringify({ time: at.toISOString(), refreshSeconds: r.seconds, ...r.snapshot }, null, 2) + "\n");
        return;
    }
    process.stdout.write(render(r.snapshot, { header: `vllm-cluster status at ${utc(at)} (asked in ${r.seconds.toFixed(1)} s)` }));
}

/** Redraws in place until a signal; the cursor comes back whatever ends it. @param {ReturnType<typeof parseArgs>} o */
async function watch(o) {
    const { readOutputs, refresh, render } = parts();
    const outputs = readOutputs(o);
    const out = process.stdout;
    // however the view ends (a signal, an error), the cursor is shown again
    process.on("exit", () => out.write(ESC.show + "\n"));
    out.write(ESC.hide + ESC.home + ESC.eos);
    /** @type {import("./statusModel").Memory} */
    let memory = {};
    for (;;) {
        const t0 = Date.now();
        const r = await refresh(outputs, { timeoutMs: o.timeout * 1000, memory });
        memory = r.memory;
        const header = `vllm-cluster status at ${utc(new Date())}, every ${o.interval} s (asked in ${r.seconds.toFixed(1)} s); Ctrl-C ends`;
        // one line short of the screen: the line after the last one must not scroll it
        const text = render(r.snapshot, { header, width: out.columns || 160, height: out.rows ? out.rows - 1 : undefined });
        out.write(ESC.home + text.replace(/\n/g, `${ESC.eol}\n`) + ESC.eos);
        await new Promise((resolve) => setTimeout(resolve, Math.max(0, o.interval * 1000 - (Date.now() - t0))));
    }
}

async function main() {
    const o = parseArgs(process.argv.slice(2));
    // an interrupted refresh leaves no probe behind (each runs in a process group of its own)
    for (const [sig, code] of /** @type {[NodeJS.Signals, number][]} */ ([
        ["SIGINT", 130],
        ["SIGTERM", 143],
        ["SIGHUP", 129],
    ])) {
        process.on(sig, () => {
            loaded?.stopProbes();
            process.exit(code);
        });
    }
    await (o.watch ? watch(o) : once(o));
}

main().catch((e) => {
    if (e instanceof StatusError) {
        console.error(`status: ${e.message}`);
        process.exit(2);
    }
    console.error(e);
    process.exit(1);
});

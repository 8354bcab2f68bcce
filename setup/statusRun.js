// @ts-check
/**
 * One refresh of the status view (setup/status.js; bench/status.js measures it): the stack's outputs read once
 * with the Pulumi CLI (no secret is needed, none is asked for), then every host asked at once, one ssh session
 * each (infra/builders/status.ts: the probe's command line; the refreshes of one process share one connection per
 * host). A host that does not answer within the bound is an answer too: unreachable, with ssh's own words.
 */
"use strict";
const { spawn, spawnSync } = require("child_process");
const fs = require("fs");
require("./tsRequire").register();
const { statusProbeCommand } = require("../infra/builders/status");
const { snapshotOf } = require("./statusModel");
const { StatusError } = require("./statusError");

/** The most a probe may print (its /metrics lines are bounded at 256 KiB). */
const MAX_ANSWER = 1024 * 1024;
const SPEC_KEYS = [
    "stack",
    "backend",
    "stateDir",
    "privateKeyPath",
    "knownHostsFile",
    "modelPath",
    "port",
    "tls",
    "serve",
    "rayHead",
    "nodes",
];

/** The key Pulumi marks a secret value with in a state file. */
const SECRET_SIG = "4dabf18193072939515e22adb298388d";

/** A value of the state with every secret as "[secret]", as `pulumi stack output` prints it. @param {unknown} v @returns {unknown} */
function withoutSecrets(v) {
    if (Array.isArray(v)) return v.map(withoutSecrets);
    if (v === null || typeof v !== "object") return v;
    if (SECRET_SIG in v) return "[secret]";
    return Object.fromEntries(Object.entries(v).map(([k, x]) => [k, withoutSecrets(x)]));
}

/**
 * The stack's outputs (secrets as "[secret]"), from `pulumi stack export`: the stack resource's outputs as the state
 * holds them, so no passphrase or secrets provider is asked for (`pulumi stack output` needs one to open the state,
 * even to print no secret); or from a file of `pulumi stack output --json`'s text. Refused naming what is missing.
 * @param {{ stack?: string, cwd?: string, outputs?: string }} o @returns {import("./statusModel").Outputs}
 */
function readOutputs(o) {
    const where = o.outputs ? o.outputs : `stack ${o.stack}`;
    let raw;
    if (o.outputs) {
        try {
            raw = fs.readFileSync(o.outputs, "utf8");
        } catch (e) {
            throw new StatusError(`--outputs ${o.outputs}: cannot be read (${/** @type {NodeJS.ErrnoException} */ (e).code})`);
        }
    } else {
        raw = JSON.stringify(exportedOutputs(o, where));
    }
    /** @type {Record<string, any>} */
    let out;
    try {
        out = JSON.parse(raw);
    } catch {
        throw new StatusError(`the outputs of ${where} are not JSON`);
    }
    if (out === null || typeof out !== "object" || Object.keys(out).length === 0) {
        throw new StatusError(`${where} has no outputs: nothing is deployed (pulumi up)`);
    }
    if (typeof out.status !== "object" || out.status === null) {
        throw new StatusError(`${where} has no \`status\` output: deployed by an older release: run pulumi up`);
    }
    const missing = SPEC_KEYS.filter((k) => out.status[k] === undefined);
    if (missing.length) throw new StatusError(`the \`status\` output of ${where} lacks ${missing.join(", ")}: run pulumi up`);
    if (!Array.isArray(out.status.nodes) || out.status.nodes.length === 0)
        throw new StatusError(`the \`status\` output of ${where} lists no node`);
    return /** @type {import("./statusModel").Outputs} */ (out);
}

/** The stack resource's outputs in `pulumi stack export` ({} when nothing is deployed). @param {{ stack?: string, cwd?: string }} o @param {string} where */
function exportedOutputs(o, where) {
    const args = ["stack", "export", "--stack", String(o.stack), ...(o.cwd ? ["--cwd", o.cwd] : [])];
    const r = spawnSync("pulumi", args, {
        encoding: "utf8",
        env: process.env,
        timeout: 120_000,
        maxBuffer: 1024 ** 3,
        stdio: ["ignore", "pipe", "pipe"],
    });
    if (r.error) {
        const why =
            /** @type {NodeJS.ErrnoException} */ (r.error).code === "ENOENT"
                ? "pulumi is not on PATH (source setup/env.sh)"
                : r.error.message;
        throw new StatusError(`cannot read the outputs of ${where}: ${why}`);
    }
    const said = r.stderr.trim().split("\n").pop() ?? "";
    if (r.status !== 0 && /no stack named|not found/i.test(r.stderr)) throw new StatusError(`no such stack ${o.stack} (pulumi: ${said})`);
    if (r.status !== 0) throw new StatusError(`pulumi stack export --stack ${o.stack} failed (exit ${r.status}): ${said}`);
    /** @type {any} */
    let state;
    try {
        state = JSON.parse(r.stdout);
    } catch {
        throw new StatusError(`the state of ${where} (pulumi stack export) is not JSON`);
    }
    const resources = Array.isArray(state?.deployment?.resources) ? state.deployment.resources : [];
    const root = resources.find((/** @type {any} */ x) => x?.type === "pulumi:pulumi:Stack");
    return withoutSecrets(root?.outputs ?? {});
}

/** The probes under way, so that an interrupted view stops them. @type {Set<import("child_process").ChildProcess>} */
const running = new Set();

/** Stops every probe under way (their process groups: ssh and what it started). */
function stopProbes() {
    for (const c of running) killGroup(c);
}

/** @param {import("child_process").ChildProcess} c */
function killGroup(c) {
    try {
        if (c.pid) process.kill(-c.pid, "SIGKILL");
    } catch {
        // already gone
    }
}

/** ssh's own words in the stderr of a step, without the step's own line about it. @param {string} err @param {string} what */
function sshWords(err, what) {
    const lines = err.split("\n").filter((l) => l.trim() !== "");
    return lines.filter((l) => !l.startsWith(`${what}: ssh to `)).pop() ?? lines.pop() ?? "";
}

/**
 * Runs one probe's command line, bounded by `timeoutMs` (its process group killed after), never rejecting.
 * @param {string} cmd @param {string} what @param {number} timeoutMs @returns {Promise<import("./statusModel").Answer>}
 */
function ask(cmd, what, timeoutMs) {
    return new Promise((resolve) => {
        const t0 = Date.now();
        // a group of its own: the bound kills ssh too, not only the shell that started it
        // this process's environment as it is now (PATH and XDG_CACHE_HOME as its caller set them)
        const child = spawn("bash", ["-c", cmd], { detached: true, env: process.env, stdio: ["ignore", "pipe", "pipe"] });
        running.add(child);
        let out = "";
        let err = "";
        let settled = false;
        /** @param {{ ok: true, stdout: string } | { ok: false, unreachable: boolean, why: string }} a */
        const done = (a) => {
            if (settled) return;
            settled = true;
            clearTimeout(timer);
            running.delete(child);
            resolve({ ...a, seconds: (Date.now() - t0) / 1000 });
        };
        const timer = setTimeout(() => {
            killGroup(child);
            const said = sshWords(err, what);
            done({ ok: false, unreachable: true, why: `no answer within ${timeoutMs / 1000} s${said ? ` (${said})` : ""}` });
        }, timeoutMs);
        child.stdout?.on("data", (d) => {
            out += d;
            if (out.length > MAX_ANSWER) {
                killGroup(child);
                done({ ok: false, unreachable: false, why: `its probe answered more than ${MAX_ANSWER} bytes` });
            }
        });
        child.stderr?.on("data", (d) => (err = (err + d).slice(-8192)));
        child.on("error", (e) => done({ ok: false, unreachable: false, why: `cannot run bash: ${e.message}` }));
        child.on("close", (code) => {
            if (code === 0) done({ ok: true, stdout: out });
            else if (code === 255) done({ ok: false, unreachable: true, why: sshWords(err, what) || "ssh failed" });
            else done({ ok: false, unreachable: false, why: `its probe failed (exit ${code}): ${sshWords(err, what) || "no message"}` });
        });
    });
}

/**
 * One refresh: every host asked at once, each bounded by `timeoutMs`; `memory` is the previous refresh's (rates
 * over the interval), returned anew.
 * @param {import("./statusModel").Outputs} outputs @param {{ timeoutMs: number, memory?: import("./statusModel").Memory }} o
 */
async function refresh(outputs, o) {
    const t0 = Date.now();
    const spec = outputs.status;
    const answers = await Promise.all(spec.nodes.map((n) => ask(statusProbeCommand(spec, n), `status of node ${n.name}`, o.timeoutMs)));
    const r = snapshotOf(outputs, answers, o.memory ?? {});
    return { ...r, seconds: (Date.now() - t0) / 1000 };
}

module.exports = { StatusError, readOutputs, refresh, stopProbes, sshWords, withoutSecrets };

#!/usr/bin/env node
// @ts-check
/**
 * The pull request's comment for one stack's preview, made from the preview's own summary and diff only: the engine's
 * event log (`pulumi preview --event-log`), never the text of the job log. What the program or a plugin prints
 * (console output, debug lines) is left out; the resource changes, the changed properties (Pulumi blinds secret
 * values there as [secret]), the policy verdicts and, when the preview failed, its errors are kept. Then every
 * secret value the job knows is replaced: the environment's (the state credentials, the config passphrase) and the
 * stack's secret config (decrypted by `pulumi config --show-secrets --json`, on stdin). GitHub masks secrets in job
 * logs, never in comments.
 *
 *   node setup/gitops/preview-comment.js --stack NAME --exit CODE --events FILE --stack-file FILE [--secret-env NAME]...
 *     < config.json   (pulumi config --show-secrets --json)     > comment.md
 */
"use strict";
const fs = require("fs");
const YAML = require("yaml");

/** GitHub refuses a comment over 65536 characters: room for the rest. */
const MAX_CHARS = 60000;
/** A property value is shown up to this length. */
const VALUE_CHARS = 160;
/** A secret shorter than this is not searched for (it would blank out ordinary words); none of the job's is. */
const MIN_SECRET = 4;

/**
 * @typedef {{ kind: string, inputDiff?: boolean }} PropertyDiff
 * @typedef {{ op: string, urn: string, type: string, old?: { inputs?: Record<string, unknown> } | null,
 *   new?: { inputs?: Record<string, unknown> } | null, keys?: string[], diffs?: string[],
 *   detailedDiff?: Record<string, PropertyDiff> | null }} StepMetadata
 * @typedef {{ resourcePreEvent?: { metadata: StepMetadata, planning?: boolean },
 *   diagnosticEvent?: { prefix?: string, message: string, severity: string },
 *   policyEvent?: { resourceUrn?: string, message: string, policyName: string, policyPackName: string,
 *     policyPackVersion: string, enforcementLevel: string },
 *   summaryEvent?: { resourceChanges?: Record<string, number>, PolicyPacks?: Record<string, string>, result?: string } }} EngineEvent
 */

/** @param {string[]} argv */
function parseArgs(argv) {
    /** @type {{ stack?: string, exit?: number, events?: string, stackFile?: string, secretEnv: string[] }} */
    const o = { secretEnv: [] };
    for (let i = 0; i < argv.length; i++) {
        const value = () => {
            const v = argv[++i];
            if (v === undefined) throw new Error(`${argv[i - 1]} needs a value`);
            return v;
        };
        switch (argv[i]) {
            case "--stack":
                o.stack = value();
                break;
            case "--exit":
                o.exit = Number(value());
                break;
            case "--events":
                o.events = value();
                break;
            case "--stack-file":
                o.stackFile = value();
                break;
            case "--secret-env":
                o.secretEnv.push(value());
                break;
            default:
                throw new Error(`unknown argument ${argv[i]}`);
        }
    }
    if (!o.stack || o.exit === undefined || Number.isNaN(o.exit) || !o.events || !o.stackFile) {
        throw new Error(
            "usage: preview-comment.js --stack NAME --exit CODE --events FILE --stack-file FILE [--secret-env NAME]... < config.json",
        );
    }
    return /** @type {Required<typeof o>} */ (o);
}

/** The engine's events, one JSON object a line (a last line cut short by a killed preview is skipped). @param {string} text */
function readEvents(text) {
    /** @type {EngineEvent[]} */
    const out = [];
    for (const line of text.split("\n")) {
        if (!line.trim()) continue;
        try {
            out.push(JSON.parse(line));
        } catch {
            // a partial line
        }
    }
    return out;
}

/**
 * The paths of the values set with --secret in a stack file (`secure:` leaves), as [top-level key, ...path].
 * @param {string} text @returns {(string | number)[][]}
 */
function securePaths(text) {
    /** @type {(string | number)[][]} */
    const out = [];
    /** @param {unknown} v @param {(string | number)[]} at */
    const walk = (v, at) => {
        if (v && typeof v === "object" && !Array.isArray(v) && Object.keys(v).length === 1 && "secure" in v) out.push(at);
        else if (Array.isArray(v)) v.forEach((x, i) => walk(x, [...at, i]));
        else if (v && typeof v === "object") for (const [k, x] of Object.entries(v)) walk(x, [...at, k]);
    };
    walk(YAML.parse(text)?.config ?? {}, []);
    return out;
}

/**
 * The secret values the job knows: the named environment variables' and the stack's secret config values (from
 * `pulumi config --show-secrets --json`, at the stack file's secure leaves).
 * @param {string[]} envNames @param {Record<string, { value?: string, objectValue?: unknown, secret?: boolean }>} config
 * @param {(string | number)[][]} secure @returns {string[]}
 */
function knownSecrets(envNames, config, secure) {
    const values = envNames.map((n) => process.env[n] ?? "");
    for (const [key, ...at] of secure) {
        const c = config[String(key)];
        if (!c?.secret) continue;
        /** @type {unknown} */
        const leaf = at.length === 0 ? c.value : at.reduce((/** @type {any} */ o, k) => o?.[k], c.objectValue);
        if (leaf !== undefined && leaf !== null) values.push(typeof leaf === "string" ? leaf : JSON.stringify(leaf));
    }
    return values;
}

/**
 * Replaces every secret in `text`: as it is, as a JSON string spells it, and each of its lines long enough to be
 * its own (a PEM key is shown line by line in a diff).
 * @param {string} text @param {string[]} secrets
 */
function redact(text, secrets) {
    const forms = new Set();
    for (const s of secrets) {
        for (const f of [s, JSON.stringify(s).slice(1, -1), ...s.split(/\r?\n/).map((l) => l.trim())]) {
            if (f.length >= MIN_SECRET && (f === s || f.length >= 8)) forms.add(f);
        }
    }
    let out = text;
    for (const f of [...forms].sort((a, b) => b.length - a.length)) out = out.split(f).join("[secret]");
    return out;
}

/** `a.b[2]["c.d"]` -> ["a", "b", 2, "c.d"] @param {string} p @returns {(string | number)[]} */
function propertyPath(p) {
    /** @type {(string | number)[]} */
    const out = [];
    const re = /([^.[\]"]+)|\[(\d+)\]|\["((?:[^"\\]|\\.)*)"\]/g;
    for (const m of p.matchAll(re)) out.push(m[1] ?? (m[2] !== undefined ? Number(m[2]) : JSON.parse(`"${m[3]}"`)));
    return out;
}

/** @param {(string | number)[]} at */
const pathText = (at) =>
    at
        .map((k, i) => (typeof k === "number" ? `[${k}]` : /^[A-Za-z_$][\w$]*$/.test(k) ? `${i ? "." : ""}${k}` : `[${JSON.stringify(k)}]`))
        .join("");

/** @param {unknown} v @returns {v is Record<string, unknown>} */
const isPlainObject = (v) => typeof v === "object" && v !== null && !Array.isArray(v);

/**
 * The leaves that differ between two input values, as the text display shows them.
 * @param {unknown} a @param {unknown} b @param {(string | number)[]} at
 * @returns {{ path: string, kind: string, before: unknown, after: unknown }[]}
 */
function leafChanges(a, b, at) {
    if (JSON.stringify(a) === JSON.stringify(b)) return [];
    if (isPlainObject(a) && isPlainObject(b)) {
        return [...new Set([...Object.keys(a), ...Object.keys(b)])].sort().flatMap((k) => leafChanges(a[k], b[k], [...at, k]));
    }
    if (Array.isArray(a) && Array.isArray(b) && a.length === b.length) return a.flatMap((x, i) => leafChanges(x, b[i], [...at, i]));
    return [{ path: pathText(at), kind: a === undefined ? "add" : b === undefined ? "delete" : "update", before: a, after: b }];
}

/**
 * A step's changed properties: the provider's detailed diff when it gave one, else the inputs compared (the keys it
 * named, or all).
 * @param {StepMetadata} m
 */
function propertyChanges(m) {
    const [olds, news] = [m.old?.inputs ?? {}, m.new?.inputs ?? {}];
    if (m.detailedDiff) {
        return Object.entries(m.detailedDiff)
            .sort(([a], [b]) => a.localeCompare(b))
            .map(([p, d]) => {
                const at = propertyPath(p);
                /** @param {Record<string, unknown>} inputs */
                const get = (inputs) => at.reduce((/** @type {any} */ o, k) => o?.[k], inputs);
                return { path: p, kind: d.kind.replace("-replace", ""), before: get(olds), after: get(news) };
            });
    }
    const keys = m.diffs?.length ? m.diffs : [...new Set([...Object.keys(olds), ...Object.keys(news)])];
    return [...keys].sort().flatMap((k) => leafChanges(olds[k], news[k], [k]));
}

/** @param {unknown} v */
function shown(v) {
    if (v === undefined) return "(none)";
    const s = typeof v === "string" ? JSON.stringify(v) : (JSON.stringify(v) ?? String(v));
    return s.length > VALUE_CHARS ? `${s.slice(0, VALUE_CHARS)}...` : s;
}

const OP_MARK = /** @type {Record<string, string>} */ ({
    create: "+",
    delete: "-",
    update: "~",
    replace: "+-",
    import: "=",
    "create-replacement": "++",
    "delete-replaced": "--",
});

/** The diff: one line per resource that changes, with its changed properties. @param {EngineEvent[]} events */
function changes(events) {
    const lines = [];
    const seen = new Set();
    for (const e of events) {
        const m = e.resourcePreEvent?.metadata;
        if (!m || ["same", "read", "refresh", "create-replacement", "delete-replaced", "discard"].includes(m.op)) continue;
        const key = `${m.op} ${m.urn}`;
        if (seen.has(key)) continue;
        seen.add(key);
        const name = m.urn.split("::").pop();
        const why = m.op === "replace" && m.keys?.length ? `  (replaced: ${m.keys.join(", ")} changed)` : "";
        lines.push(`${(OP_MARK[m.op] ?? "?").padEnd(2)} ${m.op.padEnd(8)} ${m.type}  ${name}${why}`);
        if (m.op === "update" || m.op === "replace") {
            for (const c of propertyChanges(m)) {
                const text =
                    c.kind === "add" ? shown(c.after) : c.kind === "delete" ? shown(c.before) : `${shown(c.before)} => ${shown(c.after)}`;
                lines.push(`${c.kind === "add" ? "+" : c.kind === "delete" ? "-" : "~"}      ${c.path}: ${text}`);
            }
        }
    }
    return lines;
}

/** A fenced block that no backtick run inside can end. @param {string} lang @param {string[]} lines */
function fenced(lang, lines) {
    const longest = Math.max(2, ...lines.map((l) => Math.max(0, ...(l.match(/`+/g) ?? []).map((r) => r.length))));
    const fence = "`".repeat(longest + 1);
    return [`${fence}${lang}`, ...lines, fence];
}

/**
 * The comment's Markdown.
 * @param {{ stack: string, exit: number, events: EngineEvent[], secrets: string[] }} d
 */
function render(d) {
    const summary = [...d.events].reverse().find((e) => e.summaryEvent)?.summaryEvent;
    const counts = Object.entries(summary?.resourceChanges ?? {})
        .filter(([op]) => op !== "same")
        .map(([op, n]) => `${n} to ${op}`);
    const same = summary?.resourceChanges?.same;
    const violations = d.events.flatMap((e) => (e.policyEvent ? [e.policyEvent] : []));
    const packs = Object.entries(summary?.PolicyPacks ?? {}).map(([name, version]) => `${name.split("|")[0]} ${version}`);
    const errors = d.exit === 0 ? [] : d.events.flatMap((e) => (e.diagnosticEvent?.severity === "error" ? [e.diagnosticEvent] : []));
    const steps = changes(d.events);
    const out = [
        `<!-- vllm-cluster-preview:${d.stack} -->`,
        d.exit === 0
            ? `### \`pulumi preview\` of stack \`${d.stack}\`: passed`
            : `### \`pulumi preview\` of stack \`${d.stack}\`: FAILED (exit ${d.exit})`,
        "",
        `Resources: ${counts.length ? counts.join(", ") : "no change"}${same ? ` (${same} unchanged)` : ""}.`,
        `Policies: ${packs.length ? packs.join(", ") : "no policy pack ran"}; ${violations.length ? `${violations.length} violation(s)` : "no violation"}.`,
        "",
    ];
    if (errors.length) {
        out.push(
            "**Why it failed**",
            "",
            ...fenced(
                "text",
                errors.flatMap((e) => `${e.prefix ?? ""}${e.message}`.trimEnd().split("\n")),
            ),
            "",
        );
    }
    if (violations.length) {
        const lines = violations.flatMap((v) => [
            `[${v.enforcementLevel}] ${v.policyPackName} ${v.policyName}: ${v.resourceUrn?.split("::").pop() ?? "the stack"}`,
            ...v.message
                .trimEnd()
                .split("\n")
                .map((l) => `    ${l}`),
        ]);
        out.push("**Policy violations**", "", ...fenced("text", lines), "");
    }
    const room = MAX_CHARS - out.join("\n").length - 200;
    /** @type {string[]} */
    const kept = [];
    let used = 0;
    for (const l of steps) {
        if (used + l.length + 1 > room) break;
        kept.push(l);
        used += l.length + 1;
    }
    if (kept.length < steps.length) kept.push(`# ${steps.length - kept.length} more lines not shown: the job's log has the whole diff`);
    out.push("**Changes**", "", ...fenced("diff", kept.length ? kept : ["# nothing to change"]));
    return redact(out.join("\n") + "\n", d.secrets);
}

function main() {
    const o = parseArgs(process.argv.slice(2));
    const config = JSON.parse(fs.readFileSync(0, "utf8") || "{}");
    const secrets = knownSecrets(o.secretEnv, config, securePaths(fs.readFileSync(o.stackFile, "utf8")));
    const events = fs.existsSync(o.events) ? readEvents(fs.readFileSync(o.events, "utf8")) : [];
    process.stdout.write(render({ stack: o.stack, exit: o.exit, events, secrets }));
}

module.exports = { render, redact, readEvents, securePaths, knownSecrets, propertyPath };
if (require.main === module) {
    try {
        main();
    } catch (e) {
        console.error(`preview-comment: ${/** @type {Error} */ (e).message}`);
        process.exit(2);
    }
}

// @ts-check
/**
 * The status view as text (setup/status.js prints it once, or redraws it with --watch): per host a line of memory
 * and disk and a table of the cluster's containers, then the cluster's members and what it is serving. Every
 * string in a snapshot is printable already (setup/statusModel.js); this only lays it out.
 */
"use strict";

/** @typedef {ReturnType<typeof import("./statusModel").snapshotOf>["snapshot"]} Snapshot */
/** @typedef {import("./statusModel").Host} Host */
/** @typedef {import("./statusModel").Container} Container */
/** @typedef {import("./statusMetrics").Serving} Serving */

/** @param {number} kib */
const gib = (kib) => `${(kib / 1048576).toFixed(1)} GiB`;

/** A span of seconds in the unit that reads best. @param {number} s */
function span(s) {
    if (s < 90) return `${Math.round(s)} s`;
    const m = Math.round(s / 60);
    if (m < 90) return `${m} min`;
    const h = Math.floor(m / 60);
    if (h < 48) return `${h} h ${String(m % 60).padStart(2, "0")} min`;
    return `${Math.floor(h / 24)} d ${h % 24} h`;
}

/** @param {number} v */
const secs = (v) => (v < 10 ? `${v.toFixed(2)} s` : `${v.toFixed(1)} s`);

/** Rows as columns, each as wide as its widest cell. @param {string[][]} rows @param {string} indent */
function table(rows, indent) {
    const widths = rows[0].map((_, i) => Math.max(...rows.map((r) => r[i].length)));
    return rows.map((r) => (indent + r.map((c, i) => (i === r.length - 1 ? c : c.padEnd(widths[i]))).join("  ")).trimEnd());
}

/** What a container is doing, and for how long. @param {Container} c */
function stateText(c) {
    const t = c.stateSeconds === null ? "" : ` ${span(c.stateSeconds)}`;
    if (c.state === "running") return `running${t}`;
    if (c.state === "exited" || c.state === "dead") {
        const how = c.oomKilled ? "OOM-killed" : c.exitCode === null ? "" : `exit ${c.exitCode}`;
        return `${c.state}${t ? `${t} ago` : ""}${how ? ` (${how})` : ""}`;
    }
    return c.state || "unknown";
}

/** @param {Container} c */
function budgetText(c) {
    if (c.maxStarts === null) return "-";
    return `${c.starts ?? "?"} of ${c.maxStarts}`;
}

/** @param {Host} h @returns {string[]} */
function hostLines(h) {
    const title = `${h.node} (${h.role}, ${h.sshUser}@${h.sshHost})`;
    if (h.error !== null) return [`${title}: ${h.reachable ? "no status" : "UNREACHABLE"}: ${h.error}`];
    const out = [`${title}: answered in ${h.seconds.toFixed(1)} s`];
    const m = h.memory;
    if (m && m.availableKib !== null) {
        const of = m.totalKib === null ? "" : ` of ${gib(m.totalKib)}`;
        const floor =
            m.floorKib > 0
                ? `memory floor ${gib(m.floorKib)}: ${m.belowFloor ? "BELOW THE FLOOR" : `${gib(m.availableKib - m.floorKib)} above it`}`
                : "no memory floor";
        out.push(`  MemAvailable ${gib(m.availableKib)}${of}; ${floor}`);
    }
    if (h.disk)
        out.push(
            `  free disk at ${h.disk.path || "the model path"}: ${h.disk.freeBytes === null ? "unknown" : gib(h.disk.freeBytes / 1024)}`,
        );
    if (h.docker) out.push(`  docker: ${h.docker}`);
    if (h.containers.length === 0) {
        out.push("  no container of the stack on this host");
    } else {
        const rows = [["CONTAINER", "ROLE", "STATE", "RESTARTS", "BUDGET USED", "VERDICT"]];
        for (const c of h.containers) {
            const role = c.rank ? `${c.role} rank ${c.rank}` : c.role;
            rows.push([c.name, role, stateText(c), String(c.restartCount ?? "?"), budgetText(c), c.verdict ?? "-"]);
        }
        out.push(...table(rows, "  "));
        for (const c of h.containers) {
            // what a table cell cannot hold: when and why the watchdog last restarted this container
            if (c.watchdog) {
                const [at, ...what] = c.watchdog.split(" ");
                out.push(`  ${c.name} watchdog's last restart (${at}): ${what.join(" ")}`);
            }
        }
    }
    return out;
}

/** @param {Snapshot} s @returns {string[]} */
function clusterLines(s) {
    const out = [];
    if (s.ray) {
        const r =
            /** @type {{ ok: boolean, members?: Record<string, string>, missing?: string[], strangers?: string[], gpus?: number, error?: string }} */ (
                s.ray
            );
        if (r.ok && r.members) {
            const members = Object.entries(r.members).map(([n, ip]) => `${n} ${ip}`);
            const count = members.length === 1 ? "1 member on its fabric IP" : `${members.length} members on their fabric IPs`;
            let line = `Ray: ${count} (${members.join(", ") || "none"}), ${r.gpus ?? "?"} GPUs`;
            if (r.missing?.length) line += `; MISSING: ${r.missing.join(", ")}`;
            if (r.strangers?.length) line += `; on no node's fabric IP: ${r.strangers.join(", ")}`;
            out.push(line);
        } else {
            out.push(`Ray: ${r.error}`);
        }
    }
    if (s.ranks) {
        const ranks = s.ranks.map((r) => `${r.rank} on ${r.node} ${r.state}`);
        out.push(`vLLM ranks (backend native): ${ranks.length ? ranks.join(", ") : "none found"}`);
    }
    const v = /** @type {{ ok: boolean, error?: string } & Partial<Serving>} */ (s.serving);
    if (!v.ok) return [...out, `Serving: ${v.error}`];
    const sv = /** @type {Serving} */ (v);
    const model = sv.modelNames.length ? sv.modelNames.join(", ") : s.servedModelName;
    const kv = sv.kvCacheUsage === null ? "" : `, KV cache ${(sv.kvCacheUsage * 100).toFixed(1)} % used`;
    out.push(`Serving ${model}: ${sv.running} running, ${sv.waiting} waiting${kv}`);
    out.push(...windowLines(sv));
    return out;
}

/** What the counters and the time-to-first-token histogram say over the window they cover. @param {Serving} sv */
function windowLines(sv) {
    const rate = (/** @type {number | null} */ r) => (r === null ? "?" : r.toFixed(1));
    const q = (/** @type {import("./statusMetrics").Quantile | null} */ x) =>
        x === null ? "-" : `${x.above ? "> " : ""}${secs(x.seconds)}`;
    const over = sv.requests === 1 ? "1 request" : `${sv.requests} requests`;
    const ttft = sv.requests > 0 ? `TTFT p50 ${q(sv.ttftP50)}, p95 ${q(sv.ttftP95)} over ${over}` : "no first token";
    const tokens = `prompt ${rate(sv.promptTokensPerSecond)} tokens/s, generation ${rate(sv.generationTokensPerSecond)} tokens/s`;
    if (sv.window === "interval") return [`  last ${secs(sv.seconds ?? 0)}: ${tokens}; ${ttft}`];
    const since = sv.seconds === null ? "since the server started" : `since the server started ${span(sv.seconds)} ago`;
    return [
        `  ${since}${sv.restarted ? " (it started again since the last refresh)" : ""}: ${sv.promptTokens} prompt and ${sv.generationTokens} generated tokens,`,
        `  on average ${tokens}; ${ttft}`,
    ];
}

/**
 * What the server's last start took, as the up that started it recorded (the stack's `launch` output).
 * @param {import("./statusModel").Launch | null | undefined} l
 */
function launchLines(l) {
    if (!l) return [];
    const parts = [];
    if (l.readySeconds !== undefined)
        parts.push(`ready ${secs(l.readySeconds)} after the serve container started${l.startedAt ? ` (${l.startedAt})` : ""}`);
    if (l.firstCompletionSeconds !== undefined) parts.push(`first completion ${secs(l.firstCompletionSeconds)}`);
    if (l.waitedSeconds !== undefined) parts.push(`up waited ${secs(l.waitedSeconds)}`);
    return parts.length ? [`last start: ${parts.join("; ")}`] : [];
}

/**
 * The whole view. `header` is its first line (status.js says when and how often); `width` cuts every line and
 * `height` the number of lines (the terminal's, with --watch: a view that scrolls the screen cannot be redrawn in place).
 * @param {Snapshot} s @param {{ header: string, width?: number, height?: number }} o
 */
function render(s, o) {
    const lines = [
        o.header,
        `stack ${s.stack} (backend ${s.backend}), endpoint ${s.endpoint || "(none yet)"}, model ${s.servedModelName}`,
        ...launchLines(s.launch),
        "",
        ...s.hosts.flatMap(hostLines),
        "",
        ...clusterLines(s),
    ];
    const h = o.height;
    const fit =
        h && lines.length > h
            ? [...lines.slice(0, Math.max(0, h - 1)), `… ${lines.length - h + 1} more lines (a taller terminal shows them)`]
            : lines;
    const w = o.width;
    return (w ? fit.map((l) => (l.length > w ? `${l.slice(0, Math.max(1, w - 1))}…` : l)) : fit).join("\n") + "\n";
}

module.exports = { render, span };

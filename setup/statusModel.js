// @ts-check
/**
 * The status view's facts (setup/status.js asks the hosts, setup/statusView.js draws): what each host's probe
 * (infra/scripts/status_probe.bash) answered, checked and reduced, and what the cluster makes of them. A host may
 * lie: every string it supplies becomes printable text here (setup/discovery.js: printable), before it is shown
 * or printed as JSON, and every number must be one.
 */
"use strict";
require("./tsRequire").register();
const { cleanLaunch } = require("../infra/builders/readiness");
const { printable } = require("./discovery");
const { sampleOf, servingOf } = require("./statusMetrics");

/**
 * @typedef {import("../infra/builders/status").StatusNode} Node
 * @typedef {import("../infra/builders/status").StatusSpec} Spec
 * @typedef {import("../infra/builders/readiness").LaunchTimings} Launch
 * @typedef {{ endpoint?: string, status: Spec, launch?: unknown, clusterFingerprint?: unknown }} Outputs
 * @typedef {{ ok: true, seconds: number, stdout: string } | { ok: false, seconds: number, unreachable: boolean, why: string }} Answer
 * (stateSeconds: how long a container has been in its state, by the host's clock: running since it started,
 * exited since it ended.)
 * @typedef {{ name: string, id: string, role: string, rank: string, state: string, startedAt: string,
 *   stateSeconds: number | null, exitCode: number | null, oomKilled: boolean, restartCount: number | null,
 *   starts: number | null, maxStarts: number | null, verdict: string | null, watchdog: string | null }} Container
 * @typedef {{ node: string, role: string, sshHost: string, sshUser: string, reachable: boolean, seconds: number, error: string | null,
 *   time?: number, memory?: { totalKib: number | null, availableKib: number | null, floorKib: number, belowFloor: boolean },
 *   disk?: { path: string, freeBytes: number | null }, docker?: string | null, containers: Container[],
 *   metrics?: { ok: boolean, text: string }, ray?: { ok: boolean, text: string } }} Host
 * @typedef {Record<string, { sample: import("./statusMetrics").Sample, time: number }>} Memory
 */

/** Host text as printable text of at most `max` characters ("" for what is not a string). @param {unknown} v */
const text = (v, max = 300) => (typeof v === "string" ? printable(v).slice(0, max) : "");
/** @param {unknown} v */
const num = (v) => (typeof v === "number" && Number.isFinite(v) ? v : null);
/** @param {unknown} v @returns {Record<string, unknown>} */
const obj = (v) => (v !== null && typeof v === "object" && !Array.isArray(v) ? /** @type {Record<string, unknown>} */ (v) : {});

/** "<id> <rest>" of an init file, when it is this container's. @param {unknown} line @param {string} id */
function ownLine(line, id) {
    if (typeof line !== "string") return null;
    const sp = line.indexOf(" ");
    return sp > 0 && line.slice(0, sp) === id ? line.slice(sp + 1) : null;
}

/** Seconds from an engine timestamp to the host's `now`; null for Docker's zero time or none. @param {string} t @param {number | undefined} now */
function since(t, now) {
    const ms = Date.parse(t);
    return Number.isNaN(ms) || ms <= 0 || now === undefined ? null : Math.round(Math.max(0, now - ms / 1000) * 10) / 10;
}

/** @param {unknown} raw @param {number | undefined} now @returns {Container} */
function containerOf(raw, now) {
    const c = obj(raw);
    const id = /^[0-9a-f]{12,64}$/.test(String(c.id)) ? String(c.id) : "";
    const state = text(c.state, 20);
    const startedAt = text(c.startedAt, 40);
    const own = ownLine(c.initStarts, id);
    const starts = own !== null && /^\d{1,6}$/.test(own) ? Number(own) : null;
    const verdict = id ? ownLine(c.initStatus, id) : null;
    // the serve watchdog's last restart of this very container: "<UTC time> <what it found>"
    const watchdog = id ? ownLine(c.initWatchdog, id) : null;
    const arg = Array.isArray(c.initArgs) ? c.initArgs.find((a) => typeof a === "string" && /^max-starts=\d{1,6}$/.test(a)) : undefined;
    return {
        name: text(c.name, 80).replace(/^\//, ""),
        id,
        role: text(c.role, 40),
        rank: text(c.rank, 10),
        state,
        startedAt,
        stateSeconds: state === "running" ? since(startedAt, now) : since(text(c.finishedAt, 40), now),
        exitCode: num(c.exitCode),
        oomKilled: c.oomKilled === true,
        restartCount: num(c.restartCount),
        starts,
        maxStarts: arg ? Number(String(arg).slice("max-starts=".length)) : null,
        verdict: verdict === null ? null : text(verdict),
        watchdog: watchdog === null ? null : text(watchdog),
    };
}

/** @param {string} why */
const reduced = (why) =>
    why
        .split("\n")
        // a line as ssh ends it on a terminal ("\r\n") is one line, not one with a carriage return
        .map((l) => printable(l.replace(/\r$/, "")))
        .filter(Boolean)
        .pop()
        ?.slice(0, 300) ?? "";

/**
 * One host as the view shows it, from the probe's answer (or why there is none).
 * @param {Node} n @param {Answer} a @returns {Host}
 */
function hostOf(n, a) {
    const base = { node: n.name, role: n.role, sshHost: n.sshHost, sshUser: n.sshUser, seconds: a.seconds, containers: [] };
    if (!a.ok) return { ...base, reachable: !a.unreachable, error: reduced(a.why) || "no answer" };
    /** @type {Record<string, unknown>} */
    let p;
    try {
        p = obj(JSON.parse(a.stdout));
    } catch {
        return { ...base, reachable: true, error: `its probe answered no JSON: ${text(a.stdout.trim(), 120)}` };
    }
    if (p.probe !== "status" || p.node !== n.name) {
        return { ...base, reachable: true, error: `its probe answered for ${text(p.node, 60) || "no node"}, not ${n.name}` };
    }
    const time = num(p.time) ?? undefined;
    const mem = obj(p.memory);
    const floorKib = num(n.memoryFloorKib) ?? 0;
    const availableKib = num(mem.availableKib);
    const docker = obj(p.docker);
    /** @param {unknown} v */
    const part = (v) =>
        v === undefined
            ? undefined
            : { ok: obj(v).ok === true, text: typeof obj(v).text === "string" ? String(obj(v).text) : text(obj(v).error) };
    return {
        ...base,
        reachable: true,
        error: null,
        time,
        memory: {
            totalKib: num(mem.totalKib),
            availableKib,
            floorKib,
            belowFloor: floorKib > 0 && availableKib !== null && availableKib < floorKib,
        },
        disk: { path: text(obj(p.disk).path), freeBytes: num(obj(p.disk).freeBytes) },
        docker: docker.ok === true ? null : text(docker.error) || "no answer from docker",
        containers: (Array.isArray(p.containers) ? p.containers : [])
            .slice(0, 20)
            .map((c) => containerOf(c, time))
            .sort((x, y) => (x.name < y.name ? -1 : x.name > y.name ? 1 : 0)),
        metrics: part(p.metrics),
        ray: part(p.ray),
    };
}

/**
 * Ray's live members from the head's probe (ray_members.py's JSON line), each matched to the node whose fabric IP it
 * registered with: `members` by node name, `missing` the nodes with no live member on their fabric IP, `strangers`
 * the members on an address that is no node's fabric IP (a host that joined on its management address), or what
 * the probe said went wrong.
 * @param {Host | undefined} head @param {Node[]} nodes
 */
function rayOf(head, nodes) {
    if (!head?.ray) return { ok: false, error: head?.error ? "the head did not answer" : "not asked (the head's probe ran no Ray probe)" };
    const lines = head.ray.text.split("\n").filter((l) => l.trim());
    if (head.ray.ok) {
        /** @type {unknown} */
        let answer;
        try {
            answer = JSON.parse(lines[lines.length - 1] ?? "");
        } catch {
            // an answer that is no JSON line: reported below as what it said
        }
        const listed = obj(answer).members;
        if (Array.isArray(listed)) {
            const alive = listed.slice(0, 64).map((m) => ({ ip: text(obj(m).ip, 64), gpus: num(obj(m).gpus) ?? 0 }));
            const byIp = new Map(nodes.map((n) => [n.fabricIp, n.name]));
            /** @type {Record<string, string>} */
            const members = {};
            for (const m of alive) if (byIp.has(m.ip)) members[/** @type {string} */ (byIp.get(m.ip))] = m.ip;
            return {
                ok: true,
                members,
                missing: nodes.filter((n) => !(n.name in members)).map((n) => `${n.name} (${n.fabricIp})`),
                strangers: alive.filter((m) => !byIp.has(m.ip)).map((m) => m.ip),
                gpus: alive.reduce((a, m) => a + m.gpus, 0),
            };
        }
    }
    const why = reduced(head.ray.text).replace(/^ray-members: /, "");
    return { ok: false, error: why || "the Ray probe said nothing" };
}

/** A host without the probe's raw texts (/metrics, Ray's answer): the view shows what was made of them. @param {Host} h */
function shown(h) {
    const c = { ...h };
    delete c.metrics;
    delete c.ray;
    return c;
}

/**
 * The launch timings of the stack's outputs, as far as they can be trusted (cleanLaunch); null when there are none.
 * @param {unknown} l @returns {Launch | null}
 */
function launchOf(l) {
    const out = cleanLaunch(l);
    return Object.keys(out).length ? out : null;
}

/**
 * The whole view of one refresh; `memory` (the previous refresh's samples, by serve container ID) makes rates over
 * the interval, and is returned updated for the next.
 * @param {Outputs} outputs @param {Answer[]} answers (in the order of outputs.status.nodes) @param {Memory} memory
 */
function snapshotOf(outputs, answers, memory = {}) {
    const spec = outputs.status;
    const hosts = spec.nodes.map((n, i) => hostOf(n, answers[i]));
    const head = hosts.find((h) => h.role === "head");
    const serve = head?.containers.find((c) => c.name === spec.serve);
    /** @type {Memory} */
    const next = {};
    let serving = /** @type {Record<string, unknown>} */ ({ ok: false, error: head?.error ? "the head did not answer" : "no /metrics" });
    if (head?.metrics && !head.metrics.ok) serving = { ok: false, error: reduced(head.metrics.text) || "no /metrics" };
    if (head?.metrics?.ok && head.time !== undefined) {
        const sample = sampleOf(head.metrics.text);
        const prev = serve?.id ? memory[serve.id] : undefined;
        const uptime = serve?.state === "running" ? serve.stateSeconds : null;
        serving = { ok: true, ...servingOf(sample, prev && { sample: prev.sample, seconds: head.time - prev.time }, uptime) };
        if (serve?.id) next[serve.id] = { sample, time: head.time };
    }
    const ranks = hosts.flatMap((h) =>
        h.containers
            .filter((c) => c.role === "serve" && /^\d{1,4}$/.test(c.rank))
            .map((c) => ({ node: h.node, rank: Number(c.rank), state: c.state })),
    );
    const snapshot = {
        stack: text(spec.stack),
        backend: text(spec.backend),
        endpoint: text(outputs.endpoint ?? ""),
        servedModelName: text(spec.servedModelName),
        launch: launchOf(outputs.launch),
        hosts: hosts.map(shown),
        ray: spec.backend === "ray" ? rayOf(head, spec.nodes) : null,
        ranks: spec.backend === "native" ? ranks.sort((a, b) => a.rank - b.rank) : null,
        serving,
    };
    // a refresh without a sample (the head did not answer) keeps the last one: the next rates span the gap
    return { snapshot, memory: Object.keys(next).length ? next : memory };
}

module.exports = { hostOf, containerOf, rayOf, snapshotOf, launchOf };

// @ts-check
/**
 * The stack file discovery writes: the `nodes` section from what the hosts said (each node commented with the
 * evidence), the `ssh` section that discovery itself verified, and every other section copied as text (comments
 * kept) from a template stack file, so the operator reviews one file before `pulumi preview`.
 */
"use strict";

/**
 * @typedef {import("./discovery").Host} Host
 * @typedef {import("./discovery").Addr} Addr
 */

const GIB = 1024 ** 3;

/** The RDMA devices on the fabric: on its interface, or on the same port's other PCIe link (GB10: enP2p1s0f1np1
 * beside enp1s0f1np1) when that link carries no address of its own. @param {Host} h @param {Addr} fabric */
function fabricRdma(h, fabric) {
    const port = (/** @type {string} */ n) => n.replace(/^en(P\d+)?/, "en");
    const addressed = new Set(h.probe.addrs.map((a) => a.ifname));
    return h.probe.rdma
        .filter((r) => r.netdev === fabric.ifname || (port(r.netdev) === port(fabric.ifname) && !addressed.has(r.netdev)))
        .map((r) => r.device);
}

/** @param {Host} h */
function isUnified(h) {
    return h.probe.gpus.some((g) => /GB10/i.test(g.name) || /N\/A/i.test(g.memory));
}

/**
 * One node's settings, in the order the stack files use. `env` comes from the template's node of the same name
 * (tuning no probe can find).
 * @param {Host} h @param {string} name @param {Addr} fabric @param {boolean} head @param {Record<string, unknown> | undefined} env
 */
function nodeSettings(h, name, fabric, head, env) {
    const gpus = h.probe.gpus.length;
    const rdma = fabricRdma(h, fabric);
    return {
        name,
        sshHost: h.target.host,
        sshUser: h.target.user,
        sshPort: h.target.port,
        fabricIp: fabric.ip,
        fabricInterface: fabric.ifname,
        ...(rdma.length ? { rdmaDevices: rdma } : {}),
        gpus: gpus || 1,
        gpuRuntime: gpus ? "nvidia" : "none",
        unifiedMemory: isUnified(h),
        ...(env && Object.keys(env).length ? { env } : {}),
        ...(head ? { role: "head" } : {}),
    };
}

/** Comment lines with a node's evidence. @param {Host} h @param {string} subnet @param {Addr} fabric */
function evidence(h, subnet, fabric) {
    const p = h.probe;
    const reached = p.addrs.find((a) => a.ip === p.reached);
    const gpus = p.gpus.length
        ? `${p.gpus.length} GPU(s): ${p.gpus.map((g) => `${g.name} (${/N\/A/i.test(g.memory) ? "unified memory" : `${g.memory} MiB`})`).join(", ")}`
        : `no NVIDIA GPU (nvidia-smi ${p.nvidiaSmi}): vLLM's CPU build, one rank`;
    const lines = [
        `${p.hostname}: ${p.arch}, ${p.cpus} CPUs (${p.cpu}), ${(p.memKib / 1024 ** 2).toFixed(1)} GiB memory; ${gpus}`,
        `Docker ${p.docker.version} (runtimes: ${p.docker.runtimes.join(", ")})` +
            (p.disk ? `; ${(p.disk.freeBytes / GIB).toFixed(1)} GiB free at ${p.disk.path}` : ""),
        `reached on ${p.reached}${reached ? ` (${reached.ifname}, ${reached.subnet})` : ""}; fabric ${subnet} on ${fabric.ifname}`,
        `interfaces: ${p.addrs.map((a) => `${a.ifname} ${a.ip}/${a.prefix}`).join(", ")}`,
    ];
    if (p.rdma.length) {
        lines.push(`RDMA: ${p.rdma.map((r) => `${r.device} on ${r.netdev}`).join(", ")}`);
    }
    return lines;
}

/** A YAML scalar: strings JSON-quoted when YAML could read them as something else. @param {unknown} v */
function scalar(v) {
    if (typeof v !== "string") {
        return String(v);
    }
    return /^[A-Za-z0-9_./@-]+$/.test(v) && !/^(true|false|yes|no|on|off|null|~|[0-9]+(\.[0-9]+)?)$/i.test(v) ? v : JSON.stringify(v);
}

/** @param {Record<string, unknown>} node @param {string[]} comments */
function renderNode(node, comments) {
    const out = comments.map((c) => `    # ${c}`);
    let first = true;
    for (const [k, v] of Object.entries(node)) {
        const lead = first ? "    - " : "      ";
        first = false;
        if (Array.isArray(v)) {
            out.push(`${lead}${k}: [${v.map(scalar).join(", ")}]`);
        } else if (v && typeof v === "object") {
            out.push(`${lead}${k}:`, ...Object.entries(v).map(([ek, ev]) => `        ${ek}: ${JSON.stringify(String(ev))}`));
        } else {
            out.push(`${lead}${k}: ${scalar(v)}`);
        }
    }
    return out;
}

/**
 * The template's `config:` entries as text blocks (each with the comment lines just above it), keyed by name.
 * @param {string} text @returns {{ key: string, lines: string[] }[]}
 */
function templateBlocks(text) {
    /** @type {{ key: string, lines: string[] }[]} */
    const blocks = [];
    /** @type {string[]} */
    let pending = [];
    let inConfig = false;
    for (const line of text.split("\n")) {
        if (/^\S/.test(line)) {
            inConfig = line.startsWith("config:");
            pending = [];
            continue;
        }
        if (!inConfig) continue;
        const key = /^ {2}([^\s#]\S*):(\s|$)/.exec(line);
        if (key) {
            blocks.push({ key: key[1], lines: [...pending, line] });
            pending = [];
        } else if (/^ {2}#/.test(line) || (line.trim() === "" && blocks.length === 0)) {
            pending.push(line);
        } else if (blocks.length) {
            blocks[blocks.length - 1].lines.push(...pending, line);
            pending = [];
        }
    }
    return blocks.map((b) => ({ key: b.key, lines: trimEnd(b.lines) }));
}

/** @param {string[]} lines */
function trimEnd(lines) {
    const out = [...lines];
    while (out.length && out[out.length - 1].trim() === "") out.pop();
    return out;
}

module.exports = { nodeSettings, evidence, renderNode, templateBlocks, scalar, isUnified, fabricRdma };

/**
 * The whole stack file. `template` supplies every section but nodes and ssh (secrets left out: they are
 * encrypted for the template's own stack); `sourceNode` values naming no discovered node become the head.
 * @param {{ command: string, hosts: Host[], names: string[], subnet: string, fabric: Addr[],
 *   templatePath: string, templateText: string, templateEnv: Record<string, Record<string, unknown>>,
 *   identity: string, knownHosts: string, modelPath?: string }} d
 */
function renderStack(d) {
    const out = [
        `# Discovered from the hosts by: ${d.command}`,
        `# Host keys verified against ${d.knownHosts}. Nodes below are what the hosts said (the evidence is in the`,
        `# comments); every other section is copied from ${d.templatePath}: review them before pulumi preview.`,
        "config:",
        "  # The fabric is the subnet every host shares other than the one SSH reached it on; the hosts were checked",
        `  # to reach each other there (${d.subnet}).`,
        "  vllm-cluster:nodes:",
    ];
    d.hosts.forEach((h, i) => {
        const node = nodeSettings(h, d.names[i], d.fabric[i], i === 0, d.templateEnv[d.names[i]]);
        out.push(...renderNode(node, evidence(h, d.subnet, d.fabric[i])));
    });
    for (const b of templateBlocks(d.templateText)) {
        const name = b.key.replace(/^vllm-cluster:/, "");
        if (name === "nodes" || name === "ssh") continue;
        if (b.lines.some((l) => /^\s*secure:/.test(l))) {
            out.push(`  # ${b.key}: left out, a secret of the template's stack; set it: pulumi config set --secret ${name} ...`);
            continue;
        }
        out.push(...b.lines.map((l) => adjust(l, name, d)));
    }
    out.push(
        "  # The key and known_hosts file discovery used: the program's ssh connections verify the same host keys.",
        "  vllm-cluster:ssh:",
        `    privateKeyPath: ${scalar(d.identity)}`,
        `    knownHostsFile: ${scalar(d.knownHosts)}`,
    );
    return out.join("\n") + "\n";
}

/** @param {string} line @param {string} section @param {{ names: string[], modelPath?: string }} d */
function adjust(line, section, d) {
    const src = /^(\s+sourceNode:\s*)(\S+)(.*)$/.exec(line);
    if (src && !d.names.includes(src[2].replace(/^["']|["']$/g, ""))) {
        return `${src[1]}${d.names[0]}${src[3]} # the template's ${src[2]} is not a discovered node: the head instead`;
    }
    const hp = /^(\s+hostPath:\s*)(\S+)(.*)$/.exec(line);
    if (hp && section === "model" && d.modelPath !== undefined) {
        return `${hp[1]}${scalar(d.modelPath)} # --model-path`;
    }
    return line;
}

module.exports.renderStack = renderStack;

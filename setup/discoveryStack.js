// @ts-check
/**
 * The stack file discovery writes: the `nodes` section from what the hosts said (each node commented with the
 * evidence), the `ssh` section that discovery itself verified, and every other section copied (comments kept)
 * from a template stack file, so the operator reviews one file before `pulumi preview`.
 *
 * The file is made with the `yaml` package's Document API, never by pasting text, and every string a host
 * reported is printable text (discovery.js: printable) before it gets here. Then the file is read back, by
 * `yaml` and once more with CR, NEL, U+2028 and U+2029 taken as line breaks (as go-yaml, which Pulumi reads stack
 * files with, takes them): its nodes must be exactly the computed settings, each node's evidence exactly the comment
 * written, and every other section the template's. Otherwise nothing is written, and the error names the node
 * (host) and field that differ.
 */
"use strict";
const fs = require("fs");
const { isDeepStrictEqual } = require("util");
const YAML = require("yaml");
const { DiscoveryError, printable } = require("./discovery");

/**
 * @typedef {import("./discovery").Host} Host
 * @typedef {import("./discovery").Addr} Addr
 * @typedef {{ command: string, hosts: Host[], names: string[], subnet: string, fabric: Addr[],
 *   templatePath: string, templateText: string, identity: string, knownHosts: string, modelPath?: string }} StackInput
 * @typedef {{ text: string, config: Record<string, unknown>, evidence: string[] }} StackFile
 */

const GIB = 1024 ** 3;
const NS = "vllm-cluster:";
/** How the stack file is printed: no folding of long values, flow lists as the hand-written stack files have them. */
const PRINT = { lineWidth: 0, flowCollectionPadding: false };

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

/** Comment lines with a node's evidence, printable text only. @param {Host} h @param {string} subnet @param {Addr} fabric */
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
    return lines.map(printable);
}

/** A comment as the Document API takes it: one line each, after the `#` and a space. @param {string[]} lines */
const comment = (lines) => lines.map((l) => ` ${l}`).join("\n");

/** Whether `text` as a plain YAML scalar of that version is the string `text`. @param {string} text @param {"1.1" | "1.2"} version */
function readsAsItself(text, version) {
    try {
        return YAML.parse(text, { version }) === text;
    } catch {
        return false;
    }
}

/**
 * A value as a YAML node whose strings read back as these strings under YAML 1.2 and 1.1 alike: a string that
 * either version would take for something else (`0b1`, `1_000`, `yes`) is double-quoted.
 * @param {YAML.Document} doc @param {unknown} value
 */
function valueNode(doc, value) {
    const node = doc.createNode(value);
    YAML.visit(node, {
        Scalar(_key, s) {
            if (typeof s.value !== "string") return;
            const plain = String(s.value);
            if (!(readsAsItself(plain, "1.1") && readsAsItself(plain, "1.2"))) s.type = "QUOTE_DOUBLE";
        },
        Seq(_key, s) {
            s.flow = s.items.every((i) => YAML.isScalar(i));
        },
    });
    return node;
}

/** A Pulumi secret (`secure: v1:...`) inside a config value. @param {unknown} node */
const isSecure = (node) =>
    YAML.isMap(node) && node.items.length === 1 && YAML.isScalar(node.items[0].key) && node.items[0].key.value === "secure";

/**
 * The paths of the secrets inside a config value (`[]`: the value itself is one).
 * @param {unknown} node @param {(string | number)[]} at @returns {(string | number)[][]}
 */
function securePaths(node, at = []) {
    if (isSecure(node)) return [at];
    if (YAML.isMap(node))
        return node.items.flatMap((p) => securePaths(p.value, [...at, String(YAML.isScalar(p.key) ? p.key.value : p.key)]));
    if (YAML.isSeq(node)) return node.items.flatMap((v, i) => securePaths(v, [...at, i]));
    return [];
}

/** `serve.tls.key`, `nodes[1].env.X` @param {string} key @param {(string | number)[]} at */
const keyPath = (key, at) => key.replace(NS, "") + at.map((k) => (typeof k === "number" ? `[${k}]` : `.${k}`)).join("");

/** Deletes the value at `at` (a path of keys and indexes) from a plain object. @param {any} obj @param {(string | number)[]} at */
function deleteIn(obj, at) {
    const parent = at.slice(0, -1).reduce((o, k) => o?.[k], obj);
    if (Array.isArray(parent)) parent.splice(Number(at[at.length - 1]), 1);
    else if (parent) delete parent[at[at.length - 1]];
}

/**
 * The whole stack file and what it must read back as. `templateText` supplies every section but nodes and ssh
 * (secrets left out: they are encrypted for the template's own stack), and each node's env by name;
 * image.sourceNode and model.source values naming no discovered node become the head.
 * @param {StackInput} d @returns {StackFile}
 */
function stackFile(d) {
    const doc = YAML.parseDocument(d.templateText);
    if (doc.errors.length) {
        throw new DiscoveryError(`--template ${printable(d.templatePath)}: not a YAML stack file: ${printable(doc.errors[0].message)}`);
    }
    if (!YAML.isMap(doc.contents)) doc.contents = /** @type {any} */ (doc.createNode({}));
    const top = /** @type {YAML.YAMLMap} */ (doc.contents);
    // only the config travels: the template's encryption salt and the like belong to its own stack
    top.items = top.items.filter((p) => YAML.isScalar(p.key) && p.key.value === "config");
    if (!YAML.isMap(doc.get("config"))) doc.set("config", doc.createNode({}));
    const cfg = /** @type {YAML.YAMLMap<YAML.Scalar<string>, unknown>} */ (doc.get("config"));
    const top0 = /** @type {YAML.Pair<YAML.Scalar, unknown>} */ (top.items[0]);
    top0.key.commentBefore = undefined;

    /** @type {Record<string, any>} */
    const expected = YAML.parse(d.templateText)?.config ?? {};
    const keyOf = (/** @type {YAML.Pair} */ p) => String(YAML.isScalar(p.key) ? p.key.value : p.key);

    // the template's nodes give env by name (their comments kept), then the discovered nodes take their place
    const templateNodes = cfg.get(`${NS}nodes`);
    /** @type {Map<string, unknown>} */
    const envNode = new Map();
    if (YAML.isSeq(templateNodes)) {
        for (const n of templateNodes.items) {
            if (YAML.isMap(n) && typeof n.get("name") === "string" && YAML.isMap(n.get("env", true))) {
                envNode.set(/** @type {string} */ (n.get("name")), n.get("env", true));
            }
        }
    }
    const nodes = d.hosts.map((h, i) => {
        const env = /** @type {YAML.YAMLMap | undefined} */ (envNode.get(d.names[i]));
        return nodeSettings(h, d.names[i], d.fabric[i], i === 0, env ? /** @type {Record<string, unknown>} */ (env.toJSON()) : undefined);
    });
    const evidenceOf = d.hosts.map((h, i) => comment(evidence(h, d.subnet, d.fabric[i])));
    const seq = new YAML.YAMLSeq();
    nodes.forEach((n, i) => {
        const { env, ...rest } = n;
        const node = /** @type {YAML.YAMLMap} */ (valueNode(doc, rest));
        if (env) {
            const role = node.get("role", true);
            node.delete("role");
            node.set(doc.createNode("env"), /** @type {YAML.YAMLMap} */ (envNode.get(d.names[i])).clone());
            if (role) node.set(doc.createNode("role"), role);
        }
        node.commentBefore = evidenceOf[i];
        seq.items.push(node);
    });
    const nodesPair = doc.createPair(`${NS}nodes`, seq);
    /** @type {YAML.Scalar} */ (nodesPair.key).commentBefore = comment([
        "The fabric is the subnet every host shares other than the one SSH reached it on; the hosts were checked",
        `to reach each other there (${d.subnet}).`,
    ]);
    const at = cfg.items.findIndex((p) => keyOf(p) === `${NS}nodes`);
    cfg.items = cfg.items.filter((p) => keyOf(p) !== `${NS}nodes` && keyOf(p) !== `${NS}ssh`);
    cfg.items.splice(at < 0 ? 0 : at, 0, /** @type {any} */ (nodesPair));
    delete expected[`${NS}ssh`];
    expected[`${NS}nodes`] = nodes;

    /** @type {string[]} */
    const leftOut = [];
    for (const p of [...cfg.items]) {
        const key = keyOf(p);
        for (const path of securePaths(p.value)) {
            const name = keyPath(key, path);
            if (path.length === 0) {
                cfg.items = cfg.items.filter((q) => q !== p);
                delete expected[key];
            } else {
                /** @type {YAML.YAMLMap} */ (p.value).deleteIn(path);
                deleteIn(expected[key], path);
            }
            leftOut.push(
                `${key}${path.length ? ` (${name})` : ""}: left out, a secret of the template's stack; set it: ` +
                    `pulumi config set --secret${path.length ? " --path" : ""} ${name} ...`,
            );
        }
    }

    /** @param {string} section @param {string} key @param {(v: unknown) => string | undefined} replace */
    const adjust = (section, key, replace) => {
        const old = cfg.getIn([`${NS}${section}`, key], true);
        if (!YAML.isScalar(old)) return;
        const why = replace(old.value);
        if (why === undefined) return;
        const v = /** @type {YAML.Scalar} */ (valueNode(doc, expected[`${NS}${section}`][key]));
        v.comment = ` ${why}`;
        cfg.setIn([`${NS}${section}`, key], v);
    };
    for (const [section, key] of [
        ["image", "sourceNode"],
        ["model", "source"],
    ]) {
        adjust(section, key, (v) => {
            if (d.names.includes(String(v))) return undefined;
            expected[`${NS}${section}`][key] = d.names[0];
            return `the template's ${printable(String(v))} is not a discovered node: the head instead`;
        });
    }
    if (d.modelPath !== undefined) {
        adjust("model", "hostPath", () => {
            expected[`${NS}model`].hostPath = d.modelPath;
            return "--model-path";
        });
    }

    const ssh = { privateKeyPath: d.identity, knownHostsFile: d.knownHosts };
    const sshPair = doc.createPair(`${NS}ssh`, valueNode(doc, ssh));
    /** @type {YAML.Scalar} */ (sshPair.key).commentBefore = comment([
        ...leftOut,
        "The key and known_hosts file discovery used: the program's ssh connections verify the same host keys.",
    ]);
    cfg.items.push(/** @type {any} */ (sshPair));
    expected[`${NS}ssh`] = ssh;

    doc.commentBefore = comment(
        [
            `Discovered from the hosts by: ${d.command}`,
            `Host keys verified against ${d.knownHosts}. Nodes below are what the hosts said (the evidence is in the`,
            `comments); every other section is copied from ${d.templatePath}: review them before pulumi preview.`,
        ].map(printable),
    );
    return { text: doc.toString(PRINT), config: expected, evidence: evidenceOf };
}

/** The whole stack file's text. @param {StackInput} d */
function renderStack(d) {
    return stackFile(d).text;
}

/**
 * How each reading of the file sees it: `yaml`'s (which takes a lone CR for text), and go-yaml's, which Pulumi
 * reads stack files with and which breaks lines at CR, NEL, U+2028 and U+2029 too.
 */
const READINGS = [
    ["YAML 1.2 (yaml)", (/** @type {string} */ t) => t],
    ["go-yaml (CR, NEL, U+2028 and U+2029 as line breaks)", (/** @type {string} */ t) => t.replace(/\r\n?|[\u0085\u2028\u2029]/g, "\n")],
];

/** A value as an error shows it: JSON, printable, cut short. @param {unknown} v */
const shown = (v) => (v === undefined ? "(absent)" : printable(JSON.stringify(v)).slice(0, 200));

/**
 * Reads `text` back as each reading does and checks it against what was meant: throws a DiscoveryError naming the
 * node (and its host) and the field that differ, whose evidence did not read back as the comment written (text
 * that host reported ended it), or the section that is not the template's.
 * @param {string} text @param {StackFile} meant @param {StackInput} d
 */
function checkStack(text, meant, d) {
    const host = (/** @type {number} */ i) => `${d.names[i] ?? `node ${i}`} (${d.hosts[i]?.target.spec ?? "no such host"})`;
    const readings = READINGS.map(([reading, view]) => {
        const doc = YAML.parseDocument(/** @type {(t: string) => string} */ (view)(text));
        const how = `the stack file read back as ${reading}`;
        if (doc.errors.length) throw new DiscoveryError(`${how} does not parse: ${printable(doc.errors[0].message)}`);
        const seq = doc.getIn(["config", `${NS}nodes`]);
        const cut = meant.evidence.flatMap((c, i) => {
            const item = YAML.isSeq(seq) ? seq.items[i] : undefined;
            // a comment before the first item is the list's own when read back
            const read = YAML.isMap(item)
                ? (item.commentBefore ?? (i === 0 ? /** @type {YAML.YAMLSeq} */ (seq).commentBefore : undefined))
                : undefined;
            return read === c ? [] : [i];
        });
        const blame = cut.length
            ? `; the evidence of ${cut.map(host).join(" and ")} does not read back as the comment written: text that host reported ended it`
            : "";
        return { how, blame, got: doc.toJS() ?? {} };
    });
    const wantNodes = /** @type {Record<string, unknown>[]} */ (meant.config[`${NS}nodes`]);
    // first what changed in the nodes, by any reading; then whose text did it; then the other sections
    for (const { how, blame, got } of readings) {
        const gotNodes = got.config?.[`${NS}nodes`];
        if (!Array.isArray(gotNodes) || gotNodes.length !== wantNodes.length) {
            throw new DiscoveryError(
                `${how}: nodes holds ${Array.isArray(gotNodes) ? gotNodes.length : "no list of"} nodes, not ${wantNodes.length}${blame}`,
            );
        }
        wantNodes.forEach((want, i) => {
            for (const k of new Set([...Object.keys(want), ...Object.keys(gotNodes[i] ?? {})])) {
                if (!isDeepStrictEqual(gotNodes[i]?.[k], want[k])) {
                    throw new DiscoveryError(
                        `${how}: ${host(i)}: nodes[${i}].${printable(k)} is ${shown(gotNodes[i]?.[k])}, not the discovered ${shown(want[k])}${blame}`,
                    );
                }
            }
        });
    }
    for (const { how, blame, got } of readings) {
        if (blame) throw new DiscoveryError(`${how}${blame}`);
        for (const k of Object.keys(got)) {
            if (k !== "config") throw new DiscoveryError(`${how}: a top-level key ${shown(k)} that nothing put there`);
        }
        for (const k of new Set([...Object.keys(got.config ?? {}), ...Object.keys(meant.config)])) {
            if (!isDeepStrictEqual(got.config?.[k], meant.config[k])) {
                throw new DiscoveryError(`${how}: ${printable(k)} is not what discovery took from ${printable(d.templatePath)}`);
            }
        }
    }
}

/**
 * Writes the stack file to `out`: made, checked, written beside it, read back from disk and checked again, then
 * moved into place. Any difference leaves nothing behind.
 * @param {string} out @param {StackInput} d
 */
function writeStack(out, d) {
    const file = stackFile(d);
    checkStack(file.text, file, d);
    const tmp = `${out}.${process.pid}.tmp`;
    fs.writeFileSync(tmp, file.text, { mode: 0o644, flag: "wx" });
    try {
        checkStack(fs.readFileSync(tmp, "utf8"), file, d);
        fs.renameSync(tmp, out);
    } catch (e) {
        fs.rmSync(tmp, { force: true });
        throw e;
    }
}

module.exports = { nodeSettings, evidence, isUnified, fabricRdma, stackFile, renderStack, checkStack, writeStack };

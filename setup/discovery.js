// @ts-check
/**
 * Discovery's decisions, apart from SSH (setup/discover.js does the probing): what each host's probe says
 * (infra/scripts/discover_probe.sh), which subnet is the fabric, and the stack file's node settings. Every
 * refusal is a DiscoveryError whose message names the host, the value and the flag that decides.
 */
"use strict";

class DiscoveryError extends Error {}

/**
 * @typedef {{ ifname: string, ip: string, prefix: number, subnet: string }} Addr
 * @typedef {{ index: string, name: string, memory: string }} Gpu
 * @typedef {{ hostname: string, user: string, home: string, reached: string, arch: string, cpus: number,
 *   cpu: string, memKib: number, gpus: Gpu[], nvidiaSmi: string, docker: { ok: boolean, version?: string,
 *   runtimes: string[], error?: string }, disk?: { path: string, freeBytes: number }, addrs: Addr[],
 *   rdma: { device: string, netdev: string }[], problems: string[] }} Probe
 * @typedef {{ user: string, host: string, port: number, name?: string, spec: string }} Target
 * @typedef {{ target: Target, probe: Probe }} Host
 */

/**
 * What a host says is text from a machine that may lie. Control characters (C0, DEL, C1 with NEL), the line and
 * paragraph separators (line breaks to YAML 1.1 and go-yaml, which Pulumi reads stack files with), the characters
 * that reorder text on screen (bidi controls) and any other format, private-use or unassigned code point become a
 * visible escape (`\x0d`, `\u2028`), so a value can neither end a comment in the stack file nor hide text in a
 * terminal. Every string the probe prints passes through this before it is used or shown.
 * @param {string} s
 */
function printable(s) {
    return s.replace(/[\p{Cc}\p{Cf}\p{Co}\p{Cn}\p{Zl}\p{Zp}]/gu, (c) => {
        const n = /** @type {number} */ (c.codePointAt(0));
        return n <= 0xff ? `\\x${n.toString(16).padStart(2, "0")}` : `\\u{${n.toString(16)}}`;
    });
}

/** What the names a probe reports may be (the stack schema's own rules where the name becomes a setting). */
const NAME_RULES = {
    // RFC 1123 labels (and `_`, which Linux allows), at most 253 characters
    hostname: /^(?=.{1,253}$)[A-Za-z0-9_]([A-Za-z0-9_-]{0,61}[A-Za-z0-9_])?(\.[A-Za-z0-9_]([A-Za-z0-9_-]{0,61}[A-Za-z0-9_])?)*$/,
    // a network interface (infra/configSchema/nodes.ts: fabricInterface): 15 characters at most (IFNAMSIZ)
    interface: /^(?!\.{1,2}$)[A-Za-z0-9_.:-]{1,15}$/,
    // an RDMA device (nodes.ts: rdmaDevices)
    rdma: /^[A-Za-z0-9_.:-]{1,64}$/,
    // a Docker runtime name as dockerd's config takes it (runc, nvidia, io.containerd.runc.v2, sysbox-runc)
    runtime: /^[A-Za-z0-9][A-Za-z0-9_.+-]{0,127}$/,
    // uname -m
    arch: /^[A-Za-z0-9_]{1,32}$/,
    count: /^[0-9]{1,15}$/,
};

/** Dotted quad, each part 0-255 in decimal without a leading zero (no hex, octal, spaces or fifth part). */
const IPV4_RE = /^(25[0-5]|2[0-4]\d|1\d\d|[1-9]?\d)(\.(25[0-5]|2[0-4]\d|1\d\d|[1-9]?\d)){3}$/;

/** @param {string} ip */
const isIPv4 = (ip) => IPV4_RE.test(ip);

/** @param {string} ip @returns {number} */
function ipToInt(ip) {
    return ip.split(".").reduce((acc, o) => acc * 256 + Number(o), 0);
}

/** @param {number} n @returns {string} */
function intToIp(n) {
    return [24, 16, 8, 0].map((s) => Math.floor(n / 2 ** s) % 256).join(".");
}

/**
 * "10.232.0.11/24" -> its address, prefix and subnet ("10.232.0.0/24"); undefined unless it is exactly an IPv4
 * address and a prefix of 0 to 32 in decimal. @param {string} ifname @param {string} cidr @returns {Addr | undefined}
 */
function parseAddr(ifname, cidr) {
    const m = /^([0-9.]+)\/(3[0-2]|[12]?[0-9])$/.exec(cidr);
    if (!m || !isIPv4(m[1])) return undefined;
    const [, ip, p] = m;
    const prefix = Number(p);
    const size = 2 ** (32 - prefix);
    return { ifname, ip, prefix, subnet: `${intToIp(Math.floor(ipToInt(ip) / size) * size)}/${prefix}` };
}

/**
 * The probe's TAB-separated facts, every string reduced to printable text (printable). A fact that breaks the rule
 * of what it names (a host name, an interface, an address, a runtime, a count) is not taken: it is listed in
 * `problems`, naming the fact and the value as printable text, and discovery refuses the host (probeProblems).
 * @param {string} text @returns {Probe}
 */
function parseProbe(text) {
    /** @type {Probe} */
    const p = {
        hostname: "",
        user: "",
        home: "",
        reached: "",
        arch: "",
        cpus: 0,
        cpu: "",
        memKib: 0,
        gpus: [],
        nvidiaSmi: "ok",
        docker: { ok: false, runtimes: [], error: "the probe printed no Docker line" },
        addrs: [],
        rdma: [],
        problems: [],
    };
    /** @param {string} fact @param {string} value @param {string} rule */
    const bad = (fact, value, rule) => p.problems.push(`${fact} "${value}" is not ${rule}`);
    /** Takes `value` when it matches `re`, else records the problem and gives undefined. @param {string} fact @param {string} value @param {RegExp} re @param {string} rule */
    const named = (fact, value, re, rule) => (re.test(value) ? value : (bad(fact, value, rule), undefined));
    /** @param {string} fact @param {string} value */
    const count = (fact, value) => Number(named(fact, value, NAME_RULES.count, "a whole number") ?? 0);
    for (const line of text.split("\n")) {
        const [key, ...f] = line.split("\t").map(printable);
        switch (key) {
            case "hostname":
                p.hostname = named("hostname", f[0] ?? "", NAME_RULES.hostname, "a host name (letters, digits, - _ and .)") ?? "";
                break;
            case "reached":
                p.reached = f[0] && !isIPv4(f[0]) ? (bad("reached", f[0], "an IPv4 address"), "") : (f[0] ?? "");
                break;
            case "arch":
                p.arch = named("arch", f[0] ?? "", NAME_RULES.arch, "a machine architecture (uname -m)") ?? "";
                break;
            case "user":
            case "home":
            case "cpu":
                p[key] = f[0] ?? "";
                break;
            case "cpus":
                p.cpus = count("cpus", f[0] ?? "");
                break;
            case "mem_kib":
                p.memKib = count("mem_kib", f[0] ?? "");
                break;
            case "gpu":
                if (named("gpu index", f[0] ?? "", NAME_RULES.count, "a GPU index") !== undefined) {
                    p.gpus.push({ index: f[0], name: f[1] ?? "", memory: f[2] ?? "" });
                }
                break;
            case "nvidia_smi":
                p.nvidiaSmi = f.join(": ");
                break;
            case "docker":
                p.docker =
                    f[0] === "ok"
                        ? dockerOk(f[1] ?? "", line.split("\t")[3] ?? "", bad)
                        : { ok: false, runtimes: [], error: f.slice(1).join(" ") };
                break;
            case "disk":
                p.disk = { path: f[0] ?? "", freeBytes: count("disk free bytes", f[1] ?? "") };
                break;
            case "addr": {
                const ifname = named("interface", f[0] ?? "", NAME_RULES.interface, "a network interface name");
                const a = parseAddr(ifname ?? "", f[1] ?? "");
                if (a === undefined) bad(`address of ${f[0]}`, f[1] ?? "", "an IPv4 address with a prefix length (a.b.c.d/n)");
                else if (ifname !== undefined) p.addrs.push(a);
                break;
            }
            case "rdma": {
                const device = named("RDMA device", f[0] ?? "", NAME_RULES.rdma, "an RDMA device name");
                const netdev = named("RDMA network interface", f[1] ?? "", NAME_RULES.interface, "a network interface name");
                if (device !== undefined && netdev !== undefined) p.rdma.push({ device, netdev });
                break;
            }
        }
    }
    return p;
}

/**
 * `docker ok VERSION RUNTIMES_JSON`: the runtimes are the keys of dockerd's JSON, decoded from the raw text (so an
 * escaped line break in a key is a real one, and breaks the rule of a runtime name).
 * @param {string} version @param {string} json @param {(fact: string, value: string, rule: string) => void} bad
 * @returns {Probe["docker"]}
 */
function dockerOk(version, json, bad) {
    const parsed = safeJson(json);
    if (parsed === undefined || typeof parsed !== "object" || Array.isArray(parsed)) {
        bad("docker runtimes", printable(json), "a JSON object of runtimes");
        return { ok: true, version, runtimes: [] };
    }
    const runtimes = Object.keys(parsed).map(printable);
    for (const r of runtimes.filter((r) => !NAME_RULES.runtime.test(r))) bad("docker runtime", r, "a runtime name");
    return { ok: true, version, runtimes: runtimes.filter((r) => NAME_RULES.runtime.test(r)) };
}

/**
 * What a host's probe said that breaks the rule of what it names, one line each naming the host (as the operator
 * gave it) and the fact. Discovery refuses every host with one: such a host is broken or lies.
 * @param {Host[]} hosts @returns {string[]}
 */
function probeProblems(hosts) {
    return hosts.flatMap((h) => h.probe.problems.map((m) => `${h.target.spec}: its probe says ${m}`));
}

/** @param {string | undefined} s @returns {Record<string, unknown> | undefined} */
function safeJson(s) {
    try {
        return s ? JSON.parse(s) : undefined;
    } catch {
        return undefined;
    }
}

/** A node name from a host name: a DNS label, as the stack's node names must be. @param {string} h */
function nodeName(h) {
    return h
        .toLowerCase()
        .split(".")[0]
        .replace(/[^a-z0-9-]/g, "-")
        .replace(/^-+|-+$/g, "")
        .slice(0, 63);
}

/** Addresses that can never be the fabric: loopback, link-local, Docker's own bridges and veths. @param {Addr} a */
function isInfrastructure(a) {
    return /^127\./.test(a.ip) || /^169\.254\./.test(a.ip) || /^(docker\d*|br-[0-9a-f]+|veth.*|virbr\d*)$/.test(a.ifname);
}

/** Which host has which address on a subnet. @param {Host[]} hosts @param {string} subnet */
function onSubnet(hosts, subnet) {
    return hosts.map((h) => h.probe.addrs.filter((a) => a.subnet === subnet));
}

/** @param {Addr} a */
const showAddr = (a) => `${a.ifname} ${a.ip}`;

/**
 * The fabric: the subnet every host has an address on, other than the one it was reached on. `choice` (the
 * --fabric flag) names it when more than one qualifies; `ifChoice` (--fabric-interface NODE=IF) picks among a
 * host's addresses on it. Refuses, naming the candidates and the flag, whenever it cannot tell.
 * @param {Host[]} hosts @param {string[]} names @param {{ fabric?: string, fabricInterface?: Record<string, string> }} opts
 * @returns {{ subnet: string, addrs: Addr[] }}
 */
function chooseFabric(hosts, names, opts = {}) {
    const reachedSubnets = new Set(hosts.flatMap((h) => h.probe.addrs.filter((a) => a.ip === h.probe.reached).map((a) => a.subnet)));
    const seen = new Map();
    hosts.forEach((h, i) => {
        for (const a of h.probe.addrs) {
            if (!isInfrastructure(a) && !reachedSubnets.has(a.subnet)) {
                seen.set(a.subnet, [...(seen.get(a.subnet) ?? []), i]);
            }
        }
    });
    const shared = [...seen.keys()].sort().filter((s) => hosts.every((_, i) => seen.get(s).includes(i)));
    const describe = (/** @type {string} */ s) =>
        `${s} (${onSubnet(hosts, s)
            .flatMap((as, i) => as.map((a) => `${names[i]} ${showAddr(a)}`))
            .join(", ")})`;
    let subnet;
    if (opts.fabric !== undefined) {
        const wanted = parseAddr("", opts.fabric)?.subnet;
        if (wanted === undefined) {
            throw new DiscoveryError(`--fabric ${printable(opts.fabric)}: expected a subnet such as 192.168.200.0/24`);
        }
        if (!shared.includes(wanted)) {
            throw new DiscoveryError(
                `--fabric ${opts.fabric}: not a subnet every host has an address on; ` +
                    (shared.length ? `the candidates are ${shared.map(describe).join("; ")}` : "no subnet qualifies"),
            );
        }
        subnet = wanted;
    } else if (shared.length === 1) {
        subnet = shared[0];
    } else if (shared.length > 1) {
        throw new DiscoveryError(
            `cannot tell which subnet is the fabric: ${shared.length} candidates, every host has an ` +
                `address on each: ${shared.map(describe).join("; ")}. Choose one with --fabric SUBNET (e.g. --fabric ${shared[0]}).`,
        );
    } else {
        const partial = [...seen.keys()].map((s) => {
            const missing = names.filter((_, i) => !seen.get(s).includes(i));
            return `${describe(s)}, missing on ${missing.join(", ")}`;
        });
        throw new DiscoveryError(
            "no fabric: no subnet other than the one SSH reached is shared by every host" +
                (partial.length ? `; candidates that some host lacks: ${partial.join("; ")}` : " (no other addresses at all)") +
                ". Give every host an address on the fabric (or name the right hosts).",
        );
    }
    const addrs = onSubnet(hosts, subnet).map((as, i) => pickInterface(as, names[i], subnet, opts.fabricInterface ?? {}));
    const ips = new Map();
    addrs.forEach((a, i) => {
        if (ips.has(a.ip)) {
            throw new DiscoveryError(
                `${names[i]} and ${names[ips.get(a.ip)]} both have ${a.ip} on ${subnet}: not a network ` +
                    "they share (a local bridge?). Choose another with --fabric SUBNET.",
            );
        }
        ips.set(a.ip, i);
    });
    return { subnet, addrs };
}

/** @param {Addr[]} as @param {string} name @param {string} subnet @param {Record<string, string>} chosen @returns {Addr} */
function pickInterface(as, name, subnet, chosen) {
    const want = chosen[name];
    const hits = want === undefined ? as : as.filter((a) => a.ifname === want);
    if (hits.length === 1) {
        return hits[0];
    }
    if (want !== undefined) {
        throw new DiscoveryError(
            `--fabric-interface ${name}=${want}: ${name} has no address on ${subnet} there; ` +
                `its addresses on it: ${as.map(showAddr).join(", ")}`,
        );
    }
    throw new DiscoveryError(
        `cannot tell which of ${name}'s interfaces is its fabric: ${as.length} addresses on ` +
            `${subnet}: ${as.map(showAddr).join(" and ")}. Choose with --fabric-interface ${name}=${as[0].ifname}.`,
    );
}

/**
 * Refusals about the hosts as a set, before any fabric choice: every host the same architecture, distinct names.
 * @param {Host[]} hosts @param {string[]} names
 */
function checkHosts(hosts, names) {
    const arches = new Map();
    hosts.forEach((h, i) => arches.set(h.probe.arch, [...(arches.get(h.probe.arch) ?? []), names[i]]));
    if (arches.size > 1) {
        throw new DiscoveryError(
            `mixed architectures: ${[...arches].map(([a, ns]) => `${a} on ${ns.join(", ")}`).join("; ")}. ` +
                "One image serves every host: discover hosts of one architecture.",
        );
    }
    names.forEach((n, i) => {
        const first = names.indexOf(n);
        if (!n) {
            throw new DiscoveryError(
                `${hosts[i].target.spec}: its host name gives no usable node name; name it: ${hosts[i].target.spec}=NAME`,
            );
        }
        if (first !== i) {
            throw new DiscoveryError(
                `${hosts[first].target.spec} and ${hosts[i].target.spec} are both named ${n} ` +
                    `(their host names); name them: ${hosts[i].target.spec}=NAME`,
            );
        }
    });
}

/**
 * A host that cannot run the cluster: no Docker access for the login user, or GPUs the engine cannot hand over.
 * @param {Host} h @returns {string | undefined}
 */
function hostProblem(h) {
    const d = h.probe.docker;
    if (!d.ok) {
        const hint = /permission denied/i.test(d.error ?? "")
            ? ` (add ${h.probe.user} to the docker group, or log in as a user who may use Docker)`
            : "";
        return `no Docker access for ${h.probe.user}: ${d.error}${hint}`;
    }
    if (h.probe.gpus.length > 0 && !d.runtimes.includes("nvidia")) {
        return (
            `${h.probe.gpus.length} NVIDIA GPU(s) but Docker has no nvidia runtime (runtimes: ${d.runtimes.join(", ")}); ` +
            "install the NVIDIA Container Toolkit and run nvidia-ctk runtime configure --runtime=docker"
        );
    }
    return undefined;
}

module.exports = {
    DiscoveryError,
    printable,
    isIPv4,
    parseProbe,
    parseAddr,
    probeProblems,
    nodeName,
    chooseFabric,
    checkHosts,
    hostProblem,
};

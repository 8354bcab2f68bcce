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
 *   rdma: { device: string, netdev: string }[] }} Probe
 * @typedef {{ user: string, host: string, port: number, name?: string, spec: string }} Target
 * @typedef {{ target: Target, probe: Probe }} Host
 */

/** @param {string} ip @returns {number} */
function ipToInt(ip) {
    return ip.split(".").reduce((acc, o) => acc * 256 + Number(o), 0);
}

/** @param {number} n @returns {string} */
function intToIp(n) {
    return [24, 16, 8, 0].map((s) => Math.floor(n / 2 ** s) % 256).join(".");
}

/** "10.232.0.11/24" -> its address, prefix and subnet ("10.232.0.0/24"). @param {string} ifname @param {string} cidr */
function parseAddr(ifname, cidr) {
    const [ip, p] = cidr.split("/");
    const prefix = Number(p ?? 32);
    const size = 2 ** (32 - prefix);
    return { ifname, ip, prefix, subnet: `${intToIp(Math.floor(ipToInt(ip) / size) * size)}/${prefix}` };
}

/** The probe's TAB-separated facts. @param {string} text @returns {Probe} */
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
    };
    for (const line of text.split("\n")) {
        const [key, ...f] = line.split("\t");
        switch (key) {
            case "hostname":
            case "user":
            case "home":
            case "reached":
            case "arch":
            case "cpu":
                p[key] = f[0] ?? "";
                break;
            case "cpus":
                p.cpus = Number(f[0]);
                break;
            case "mem_kib":
                p.memKib = Number(f[0]);
                break;
            case "gpu":
                p.gpus.push({ index: f[0], name: f[1] ?? "", memory: f[2] ?? "" });
                break;
            case "nvidia_smi":
                p.nvidiaSmi = f.join(": ");
                break;
            case "docker":
                p.docker =
                    f[0] === "ok"
                        ? { ok: true, version: f[1], runtimes: Object.keys(safeJson(f[2]) ?? {}) }
                        : { ok: false, runtimes: [], error: f.slice(1).join(" ") };
                break;
            case "disk":
                p.disk = { path: f[0], freeBytes: Number(f[1]) };
                break;
            case "addr":
                p.addrs.push(parseAddr(f[0], f[1]));
                break;
            case "rdma":
                p.rdma.push({ device: f[0], netdev: f[1] });
                break;
        }
    }
    return p;
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
        const wanted = opts.fabric.includes("/") ? parseAddr("", opts.fabric).subnet : opts.fabric;
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

module.exports = { DiscoveryError, parseProbe, parseAddr, nodeName, chooseFabric, checkHosts, hostProblem };

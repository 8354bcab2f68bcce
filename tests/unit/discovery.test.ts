/**
 * Discovery's decisions (setup/discovery.js, setup/discoveryStack.js) from probe texts, and the probe script itself
 * run on this machine against a made-up sysfs (RDMA devices and their network interfaces). The simulated hosts'
 * discovery, end to end, is tests/integration/discover.test.ts.
 */
import { spawnSync } from "child_process";
import * as fs from "fs";
import * as os from "os";
import * as path from "path";
import { validateConfig } from "../../infra/config";

// eslint-disable-next-line @typescript-eslint/no-require-imports
const d = require("../../setup/discovery.js");
// eslint-disable-next-line @typescript-eslint/no-require-imports
const s = require("../../setup/discoveryStack.js");
// eslint-disable-next-line @typescript-eslint/no-require-imports
const yaml = require("js-yaml") as { load(s: string): unknown };

const ROOT = path.join(__dirname, "..", "..");

/** A probe text as infra/scripts/discover_probe.sh prints it. */
function probe(o: {
    host: string;
    reached: string;
    addrs: [string, string][];
    arch?: string;
    gpus?: string[];
    docker?: string;
    rdma?: [string, string][];
}): string {
    const lines = [
        ["hostname", o.host],
        ["user", "aurora"],
        ["home", "/home/aurora"],
        ["reached", o.reached],
        ["arch", o.arch ?? "aarch64"],
        ["cpus", "20"],
        ["cpu", "Cortex-X925"],
        ["mem_kib", "125000000"],
        ...(o.gpus ?? ["0\tNVIDIA GB10\t[N/A]"]).map((g) => ["gpu", g]),
        ["docker", o.docker ?? 'ok\t28.3.3\t{"nvidia":{"path":"nvidia-container-runtime"},"runc":{"path":"runc"}}'],
        ["disk", "/home/aurora/models", String(500 * 1024 ** 3)],
        ...o.addrs.map(([i, a]) => ["addr", i, a]),
        ...(o.rdma ?? []).map(([dev, net]) => ["rdma", dev, net]),
    ];
    return lines.map((l) => l.join("\t")).join("\n") + "\n";
}

const SPARK_ADDRS = (n: number): [string, string][] => [
    ["lo", "127.0.0.1/8"],
    ["enP7s7", `10.1.230.${179 + n}/24`],
    ["docker0", "172.17.0.1/16"],
    ["enp1s0f1np1", `192.168.200.${11 + n}/24`],
];
const SPARK_RDMA: [string, string][] = [
    ["rocep1s0f1", "enp1s0f1np1"],
    ["roceP2p1s0f1", "enP2p1s0f1np1"],
];

function host(n: number, extra: Partial<Parameters<typeof probe>[0]> = {}) {
    const ip = `10.1.230.${179 + n}`;
    return {
        target: { user: "aurora", host: ip, port: 22, spec: `aurora@${ip}` },
        probe: d.parseProbe(probe({ host: `spark-${n}`, reached: ip, addrs: SPARK_ADDRS(n), rdma: SPARK_RDMA, ...extra })),
    };
}

describe("choosing the fabric", () => {
    it("is the one subnet every host shares besides the one SSH reached, never Docker's bridge", () => {
        const f = d.chooseFabric([host(1), host(2)], ["spark-1", "spark-2"]);
        expect(f.subnet).toBe("192.168.200.0/24");
        expect(f.addrs.map((a: { ifname: string; ip: string }) => `${a.ifname} ${a.ip}`)).toEqual([
            "enp1s0f1np1 192.168.200.12",
            "enp1s0f1np1 192.168.200.13",
        ]);
    });

    it("refuses two candidate subnets, naming both and the flag; --fabric chooses", () => {
        const second = (n: number) => ({ addrs: [...SPARK_ADDRS(n), ["enP2p1s0f1np1", `192.168.100.${11 + n}/24`] as [string, string]] });
        const hosts = [host(1, second(1)), host(2, second(2))];
        expect(() => d.chooseFabric(hosts, ["spark-1", "spark-2"])).toThrow(
            /2 candidates.*192\.168\.100\.0\/24 \(spark-1 enP2p1s0f1np1 192\.168\.100\.12.*192\.168\.200\.0\/24 .*--fabric SUBNET/,
        );
        expect(d.chooseFabric(hosts, ["spark-1", "spark-2"], { fabric: "192.168.100.0/24" }).subnet).toBe("192.168.100.0/24");
        expect(() => d.chooseFabric(hosts, ["spark-1", "spark-2"], { fabric: "10.9.9.0/24" })).toThrow(
            /--fabric 10\.9\.9\.0\/24: not a subnet every host/,
        );
    });

    it("refuses a host with two addresses on the fabric, naming both; --fabric-interface chooses", () => {
        const h1 = host(1, { addrs: [...SPARK_ADDRS(1), ["extra0", "192.168.200.40/24"]] });
        expect(() => d.chooseFabric([h1, host(2)], ["spark-1", "spark-2"])).toThrow(
            "cannot tell which of spark-1's interfaces is its fabric: 2 addresses on 192.168.200.0/24: enp1s0f1np1 192.168.200.12 and extra0 192.168.200.40. Choose with --fabric-interface spark-1=enp1s0f1np1.",
        );
        const f = d.chooseFabric([h1, host(2)], ["spark-1", "spark-2"], { fabricInterface: { "spark-1": "extra0" } });
        expect(f.addrs[0].ip).toBe("192.168.200.40");
    });

    it("refuses when a host is missing from the only other subnet, naming it", () => {
        const h2 = host(2, { addrs: SPARK_ADDRS(2).filter(([i]) => i !== "enp1s0f1np1") });
        expect(() => d.chooseFabric([host(1), h2], ["spark-1", "spark-2"])).toThrow(
            /no fabric.*192\.168\.200\.0\/24 \(spark-1 enp1s0f1np1 192\.168\.200\.12\), missing on spark-2/,
        );
    });

    it("refuses a subnet on which two hosts have the same address (a local bridge, not a network they share)", () => {
        const bridge = (n: number) => ({
            addrs: [...SPARK_ADDRS(n).filter(([i]) => i !== "enp1s0f1np1"), ["lxcbr0", "10.0.3.1/24"] as [string, string]],
        });
        expect(() => d.chooseFabric([host(1, bridge(1)), host(2, bridge(2))], ["spark-1", "spark-2"])).toThrow(
            /both have 10\.0\.3\.1 on 10\.0\.3\.0\/24/,
        );
    });
});

describe("the hosts as a set and one by one", () => {
    it("refuses mixed architectures, naming which host has which", () => {
        expect(() => d.checkHosts([host(1), host(2, { arch: "x86_64" })], ["spark-1", "spark-2"])).toThrow(
            "mixed architectures: aarch64 on spark-1; x86_64 on spark-2. One image serves every host: discover hosts of one architecture.",
        );
    });

    it("refuses two hosts with one name, naming the flag that renames", () => {
        expect(() => d.checkHosts([host(1), host(1)], ["spark-1", "spark-1"])).toThrow(/both named spark-1.*aurora@10\.1\.230\.180=NAME/);
    });

    it("names a login user without Docker access, and GPUs Docker cannot hand over", () => {
        const denied = host(1, {
            docker: "error\tpermission denied while trying to connect to the Docker daemon socket at unix:///var/run/docker.sock",
        });
        expect(d.hostProblem(denied)).toMatch(/^no Docker access for aurora: permission denied .* \(add aurora to the docker group/);
        expect(d.hostProblem(host(1, { docker: 'ok\t28.3.3\t{"runc":{"path":"runc"}}' }))).toMatch(
            /1 NVIDIA GPU\(s\) but Docker has no nvidia runtime/,
        );
        expect(d.hostProblem(host(1))).toBeUndefined();
    });
});

describe("the stack file", () => {
    const template = fs.readFileSync(path.join(ROOT, "stacks", "Pulumi.spark.yaml"), "utf8");

    function render(extraTemplate = "") {
        const hosts = [host(1), host(2)];
        const names = ["spark-1", "spark-2"];
        const f = d.chooseFabric(hosts, names);
        return s.renderStack({
            command: "npm run discover -- aurora@10.1.230.180 aurora@10.1.230.181",
            hosts,
            names,
            subnet: f.subnet,
            fabric: f.addrs,
            templatePath: "stacks/Pulumi.spark.yaml",
            templateText: template + extraTemplate,
            identity: "~/.ssh/id_ed25519",
            knownHosts: "~/.ssh/known_hosts",
        });
    }

    it("gives two GB10 Sparks the settings of the hand-written spark stack, and the program accepts it", () => {
        const doc = yaml.load(render()) as { config: Record<string, unknown> };
        const hand = yaml.load(template) as { config: Record<string, unknown> };
        expect(doc.config["vllm-cluster:nodes"]).toEqual(
            (hand.config["vllm-cluster:nodes"] as Record<string, unknown>[]).map((n) => ({
                ...n,
                sshHost: n.name === "spark-1" ? "10.1.230.180" : "10.1.230.181",
            })),
        );
        const cfg = validateConfig(Object.fromEntries(Object.entries(doc.config).map(([k, v]) => [k.replace(/^vllm-cluster:/, ""), v])));
        expect(cfg.nodes.map((n) => [n.fabricIp, n.unifiedMemory, n.rdmaDevices])).toEqual([
            ["192.168.200.12", true, ["rocep1s0f1", "roceP2p1s0f1"]],
            ["192.168.200.13", true, ["rocep1s0f1", "roceP2p1s0f1"]],
        ]);
        expect(cfg.ssh).toEqual({ privateKeyPath: "~/.ssh/id_ed25519", knownHostsFile: "~/.ssh/known_hosts" });
    });

    it("keeps the template's comments, and never copies its secrets (encrypted for another stack)", () => {
        const text = render("  vllm-cluster:hfToken:\n    secure: v1:AAAA\n");
        expect(text).toContain("# HTTPS: the bearer key never crosses the management network in clear");
        expect(text).not.toContain("v1:AAAA");
        expect(text).toContain("# vllm-cluster:hfToken: left out, a secret of the template's stack");
        expect(text).toMatch(/# spark-1: aarch64, 20 CPUs \(Cortex-X925\), 119\.2 GiB memory; 1 GPU\(s\): NVIDIA GB10 \(unified memory\)/);
    });
});

describe("the probe script, on this machine", () => {
    it("lists each RDMA device with its network interface, and this machine's addresses", () => {
        const sys = fs.mkdtempSync(path.join(os.tmpdir(), "vcl-sysfs-"));
        try {
            for (const [dev, net] of SPARK_RDMA) {
                fs.mkdirSync(path.join(sys, "class", "infiniband", dev, "device", "net", net), { recursive: true });
            }
            const r = spawnSync("bash", [path.join(ROOT, "infra", "scripts", "discover_probe.sh"), "/nonexistent/models"], {
                env: { ...process.env, VCL_PROBE_SYSFS: sys },
                encoding: "utf8",
            });
            expect(r.status).toBe(0);
            const p = d.parseProbe(r.stdout);
            expect(p.rdma).toEqual([
                { device: "roceP2p1s0f1", netdev: "enP2p1s0f1np1" },
                { device: "rocep1s0f1", netdev: "enp1s0f1np1" },
            ]);
            expect(p.addrs).toContainEqual({ ifname: "lo", ip: "127.0.0.1", prefix: 8, subnet: "127.0.0.0/8" });
            expect(p.disk.path).toBe("/");
            expect(p.arch).toBe(os.arch() === "x64" ? "x86_64" : p.arch);
            expect(p.cpus).toBe(os.cpus().length);
        } finally {
            fs.rmSync(sys, { recursive: true, force: true });
        }
    });
});

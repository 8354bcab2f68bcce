/**
 * Discovery against hosts that lie (setup/discovery.js, setup/discoveryStack.js): probe texts whose every field
 * carries control characters, line separators and YAML, fed through the probe's parser and the stack file writer
 * as setup/discover.js runs them. The stack file must hold exactly the node settings an honest twin of each host
 * gets, whatever the text; a fact that breaks the rule of what it names is refused naming the host and the fact.
 * The same lies told by the simulated hosts themselves: tests/integration/discover.test.ts.
 */
import * as fs from "fs";
import * as os from "os";
import * as path from "path";

// eslint-disable-next-line @typescript-eslint/no-require-imports
const d = require("../../setup/discovery.js");
// eslint-disable-next-line @typescript-eslint/no-require-imports
const s = require("../../setup/discoveryStack.js");
// eslint-disable-next-line @typescript-eslint/no-require-imports
const YAML = require("yaml") as { parse(s: string): unknown };
// eslint-disable-next-line @typescript-eslint/no-require-imports
const jsYaml = require("js-yaml") as { load(s: string): unknown };

const ROOT = path.join(__dirname, "..", "..");
const TEMPLATE = fs.readFileSync(path.join(ROOT, "stacks", "Pulumi.local.yaml"), "utf8");
const NAMES = ["spark-1", "spark-2"];

/** The facts a probe prints (infra/scripts/discover_probe.sh), by the name this test changes them under. */
interface Facts {
    hostname: string;
    user: string;
    home: string;
    reached: string;
    arch: string;
    cpus: string;
    cpu: string;
    memKib: string;
    gpuName: string;
    gpuMemory: string;
    nvidiaSmi: string;
    dockerVersion: string;
    runtime: string;
    diskPath: string;
    diskFree: string;
    ifname: string;
    cidr: string;
    rdmaDevice: string;
    rdmaNetdev: string;
}

function honest(n: number): Facts {
    return {
        hostname: `spark-${n}`,
        user: "root",
        home: "/root",
        reached: `10.231.0.${10 + n}`,
        arch: "x86_64",
        cpus: "2",
        cpu: "AMD EPYC 7B13",
        memKib: "24000000",
        gpuName: "NVIDIA GB10",
        gpuMemory: "[N/A]",
        nvidiaSmi: "absent",
        dockerVersion: "28.5.2",
        runtime: "nvidia",
        diskPath: "/var/lib",
        diskFree: "100000000000",
        ifname: "mgmt0",
        cidr: `10.231.0.${10 + n}/24`,
        rdmaDevice: "rocep1s0f1",
        rdmaNetdev: "fabric0",
    };
}

/** The probe's text for these facts (one GPU when gpuName is set, the fabric on fabric0 always). */
function probeText(f: Facts, gpu: boolean): string {
    const lines = [
        ["hostname", f.hostname],
        ["user", f.user],
        ["home", f.home],
        ["reached", f.reached],
        ["arch", f.arch],
        ["cpus", f.cpus],
        ["cpu", f.cpu],
        ["mem_kib", f.memKib],
        ...(gpu ? [["gpu", "0", f.gpuName, f.gpuMemory]] : [["nvidia_smi", "error", f.nvidiaSmi]]),
        ["docker", "ok", f.dockerVersion, JSON.stringify({ [f.runtime]: { path: "x" }, runc: { path: "runc" } })],
        ["disk", f.diskPath, f.diskFree],
        ["addr", "lo", "127.0.0.1/8"],
        ["addr", f.ifname, f.cidr],
        ["addr", "fabric0", f.reached.replace("10.231.", "10.232.") + "/24"],
        ["rdma", f.rdmaDevice, f.rdmaNetdev],
    ];
    return lines.map((l) => l.join("\t")).join("\n") + "\n";
}

/** Facts whose rule discovery checks (a host name, an address, a count...): a lie there is refused, by fact name. */
const CHECKED: Partial<Record<keyof Facts, string>> = {
    hostname: "hostname",
    reached: "reached",
    arch: "arch",
    cpus: "cpus",
    memKib: "mem_kib",
    runtime: "docker runtime",
    diskFree: "disk free bytes",
    ifname: "interface",
    cidr: "address of mgmt0",
    rdmaDevice: "RDMA device",
    rdmaNetdev: "RDMA network interface",
};
/** Facts that are only shown (in the evidence comments and messages): a lie there is written as printable text. */
const SHOWN: (keyof Facts)[] = ["user", "home", "cpu", "gpuName", "gpuMemory", "nvidiaSmi", "dockerVersion", "diskPath"];

/** A small seeded generator, so a failure names a seed that reproduces it. */
function rng(seed: number): () => number {
    let x = seed >>> 0 || 1;
    return () => {
        x ^= x << 13;
        x ^= x >>> 17;
        x ^= x << 5;
        return (x >>> 0) / 2 ** 32;
    };
}

/** Characters a hostile host may send inside a field (TAB and LF are the probe's own separators). */
const CONTROL = [
    ...Array.from({ length: 32 }, (_, i) => String.fromCharCode(i)).filter((c) => c !== "\t" && c !== "\n"),
    "\x7f",
    "\x85",
    "\x9b",
    "\u2028",
    "\u2029",
    "\u202e",
    "\u2066",
    "\u200b",
    "\ufeff",
    "\x1b[2K",
];
const YAML_BITS = [": ", "- ", "#", "{", "}", "[", "]", "&a ", "*a", "!!js/function ", "'", '"', "|", ">", "---", "...", "%YAML 1.1", "? "];
/** What the hostile host wrote into the head's node: each ends the comment (CR, NEL, U+2028) and comments out the rest. */
const INJECTIONS = [
    "\r      env: {LD_PRELOAD: /tmp/x.so}\r    #",
    "\u2028      env: {HTTPS_PROXY: http://203.0.113.9:3128}\u2028    #",
    "\u0085    - name: evil\u0085      sshHost: 203.0.113.9\u0085    #",
    "\r\r  vllm-cluster:backend: native\r  #",
];

function hostile(next: () => number): string {
    const pick = <T>(xs: T[]) => xs[Math.floor(next() * xs.length)];
    const parts = [pick(CONTROL)];
    for (let i = 0, n = 1 + Math.floor(next() * 6); i < n; i++) {
        const r = next();
        parts.push(
            r < 0.3
                ? pick(CONTROL)
                : r < 0.55
                  ? pick(YAML_BITS)
                  : r < 0.75
                    ? pick(INJECTIONS)
                    : pick(["spark", "ü", "名", "x y", "0x0d", "1.2"]),
        );
    }
    // shuffle, keeping at least one control character somewhere
    return parts.sort(() => next() - 0.5).join("");
}

interface Host {
    target: { user: string; host: string; port: number; spec: string };
    probe: { problems: string[] };
}

function hostsOf(facts: Facts[], gpu: boolean): Host[] {
    return facts.map((f, i) => ({
        target: { user: "root", host: `10.231.0.${11 + i}`, port: 22, spec: `root@10.231.0.${11 + i}` },
        probe: d.parseProbe(probeText(f, gpu)),
    }));
}

let dir: string;
beforeAll(() => (dir = fs.mkdtempSync(path.join(os.tmpdir(), "vcl-discover-hostile-"))));
afterAll(() => fs.rmSync(dir, { recursive: true, force: true }));

/** What discover.js does once the probes are in: refuse lies, choose the fabric, write the file. */
function discoverFrom(hosts: Host[], out: string): void {
    const lies = d.probeProblems(hosts);
    if (lies.length) throw new d.DiscoveryError(lies.join("\n"));
    d.checkHosts(hosts, NAMES);
    const f = d.chooseFabric(hosts, NAMES);
    s.writeStack(out, {
        command: "npm run discover -- root@10.231.0.11 root@10.231.0.12",
        hosts,
        names: NAMES,
        subnet: f.subnet,
        fabric: f.addrs,
        templatePath: "stacks/Pulumi.local.yaml",
        templateText: TEMPLATE,
        identity: "/k/id",
        knownHosts: "/k/known_hosts",
    });
}

type Config = { config: Record<string, unknown> };
const nodesOf = (text: string, parse: (t: string) => unknown) => (parse(text) as Config).config["vllm-cluster:nodes"];
/** Every key anywhere in a parsed document. */
function keys(v: unknown): string[] {
    if (Array.isArray(v)) return v.flatMap(keys);
    if (v && typeof v === "object") return Object.entries(v).flatMap(([k, x]) => [k, ...keys(x)]);
    return [];
}

describe("a hostile host's text in every probed field", () => {
    const ROUNDS = 300;

    test("random lies (300 seeds): the file's nodes equal an honest twin's under every reading, or the lie is refused naming host and fact", () => {
        let written = 0;
        let refused = 0;
        for (let seed = 1; seed <= ROUNDS; seed++) {
            const next = rng(seed);
            const gpu = next() < 0.5;
            const twins = [honest(1), honest(2)];
            const facts = twins.map((f) => ({ ...f }));
            // every shown field of the second host lies; in half the rounds one checked field of a random host too
            // (a GPU named GB10, or with memory N/A, is unified memory: the lies keep what decides that)
            const lieIn = (f: Facts, k: keyof Facts) =>
                (f[k] = k === "gpuName" || k === "gpuMemory" ? `${f[k]}${hostile(next)}` : hostile(next));
            for (const k of SHOWN) lieIn(facts[1], k);
            for (const k of SHOWN) if (next() < 0.5) lieIn(facts[0], k);
            const checked = Object.keys(CHECKED) as (keyof Facts)[];
            const lie = next() < 0.5 ? { host: Math.floor(next() * 2), key: checked[Math.floor(next() * checked.length)] } : undefined;
            if (lie) facts[lie.host][lie.key] = hostile(next);
            const out = path.join(dir, `round-${seed}.yaml`);
            const context = `seed ${seed}: ${JSON.stringify(facts)}`;
            let error: Error | undefined;
            try {
                discoverFrom(hostsOf(facts, gpu), out);
            } catch (e) {
                error = e as Error;
            }
            if (lie) {
                expect([context, error?.constructor.name, fs.existsSync(out)]).toEqual([context, "DiscoveryError", false]);
                expect([context, error!.message]).toEqual([
                    context,
                    expect.stringContaining(`root@10.231.0.${11 + lie.host}: its probe says ${CHECKED[lie.key]} "`),
                ]);
                // the refusal shows the lie as printable text only
                expect([context, /[\p{Cc}\p{Cf}\p{Zl}\p{Zp}]/u.test(error!.message.replace(/\n/g, ""))]).toEqual([context, false]);
                refused++;
                continue;
            }
            expect([context, error?.message]).toEqual([context, undefined]);
            const text = fs.readFileSync(out, "utf8");
            const want = nodesOf(renderTwin(twins, gpu), YAML.parse);
            // three readings: yaml's, another parser's (js-yaml) and go-yaml's line breaks (CR, NEL, U+2028, U+2029)
            const goYaml = (t: string) => YAML.parse(t.replace(/\r\n?|[\u0085\u2028\u2029]/g, "\n"));
            for (const parse of [YAML.parse, jsYaml.load, goYaml]) {
                expect([context, nodesOf(text, parse)]).toEqual([context, want]);
                expect([
                    context,
                    keys(parse(text)).filter((k) => /LD_PRELOAD|HTTPS_PROXY|backend|evil/.test(k) && k !== "vllm-cluster:backend"),
                ]).toEqual([context, []]);
                expect([context, (parse(text) as Config).config["vllm-cluster:backend"]]).toEqual([context, "ray"]);
            }
            // nothing but printable text and line feeds in the file
            expect([context, /[\p{Cc}\p{Cf}\p{Zl}\p{Zp}]/u.test(text.replace(/\n/g, ""))]).toEqual([context, false]);
            written++;
        }
        // both outcomes were exercised, most rounds
        expect(written).toBeGreaterThan(ROUNDS / 4);
        expect(refused).toBeGreaterThan(ROUNDS / 4);
    });

    /** The stack file of honest hosts, as the oracle. */
    function renderTwin(twins: Facts[], gpu: boolean): string {
        const hosts = hostsOf(twins, gpu);
        const f = d.chooseFabric(hosts, NAMES);
        return s.renderStack({
            command: "twin",
            hosts,
            names: NAMES,
            subnet: f.subnet,
            fabric: f.addrs,
            templatePath: "t",
            templateText: TEMPLATE,
            identity: "/k/id",
            knownHosts: "/k/known_hosts",
        });
    }

    test("the issue's hostile CPU string is written as visible escapes in spark-2's evidence, and spark-1 keeps its own env", () => {
        const facts = [honest(1), { ...honest(2), cpu: INJECTIONS[0] }];
        const out = path.join(dir, "cpu.yaml");
        discoverFrom(hostsOf(facts, false), out);
        const text = fs.readFileSync(out, "utf8");
        expect(text).toContain("    # spark-2: x86_64, 2 CPUs (\\x0d      env: {LD_PRELOAD: /tmp/x.so}\\x0d    #), 22.9 GiB memory;");
        const nodes = nodesOf(text, YAML.parse) as { env?: Record<string, string> }[];
        expect(Object.keys(nodes[0].env!)).toEqual(["VLLM_CPU_KVCACHE_SPACE", "OMP_NUM_THREADS", "OMP_PLACES", "OMP_PROC_BIND"]);
    });
});

describe("facts checked against what they name", () => {
    const one = (lines: string) => d.parseProbe(lines).problems as string[];

    test("an address that is not exactly a dotted quad with a prefix: hex, a fifth part, a space", () => {
        for (const bad of [
            "192.168.200.0x0d/24",
            "1.192.168.200.13/24",
            "192.168.200. 13/24",
            "192.168.200.013/24",
            "192.168.200.13/33",
            "192.168.200.13",
        ]) {
            expect(one(`addr\tfabric0\t${bad}\n`)).toEqual([
                `address of fabric0 ${JSON.stringify(bad)} is not an IPv4 address with a prefix length (a.b.c.d/n)`,
            ]);
            expect(d.parseAddr("fabric0", bad)).toBeUndefined();
        }
        expect(d.parseAddr("fabric0", "192.168.200.13/24")).toEqual({
            ifname: "fabric0",
            ip: "192.168.200.13",
            prefix: 24,
            subnet: "192.168.200.0/24",
        });
        expect(one("reached\t10.231.0.0x0b\n")).toEqual(['reached "10.231.0.0x0b" is not an IPv4 address']);
    });

    test("host, interface and runtime names: control characters, spaces and lengths beyond the kernel's are refused", () => {
        expect(one("hostname\tspark-2\r\n")).toEqual(['hostname "spark-2\\x0d" is not a host name (letters, digits, - _ and .)']);
        expect(one("hostname\tspark 2\n")).toHaveLength(1);
        expect(one("hostname\tspark-2.lab.example\n")).toEqual([]);
        expect(one("addr\tfabric0\u2028x\t10.0.0.1/24\n")).toEqual(['interface "fabric0\\u{2028}x" is not a network interface name']);
        expect(one("addr\tabcdefghijklmnop\t10.0.0.1/24\n")).toHaveLength(1);
        expect(one("addr\t..\t10.0.0.1/24\n")).toHaveLength(1);
        expect(one(`docker\tok\t28.0\t${JSON.stringify({ "runc\n      env: {A: b}": {}, nvidia: {} })}\n`)).toEqual([
            'docker runtime "runc\\x0a      env: {A: b}" is not a runtime name',
        ]);
        expect(one("docker\tok\t28.0\tnot json\n")).toEqual(['docker runtimes "not json" is not a JSON object of runtimes']);
        expect(one("cpus\t0x10\n")).toEqual(['cpus "0x10" is not a whole number']);
    });

    test("the refusal names each host as the operator gave it and every fact that lies", () => {
        const facts = [honest(1), { ...honest(2), cidr: "192.168.200.0x0d/24", hostname: "spark-2\rx" }];
        expect(() => discoverFrom(hostsOf(facts, false), path.join(dir, "refused.yaml"))).toThrow(
            'root@10.231.0.12: its probe says hostname "spark-2\\x0dx" is not a host name (letters, digits, - _ and .)\n' +
                'root@10.231.0.12: its probe says address of mgmt0 "192.168.200.0x0d/24" is not an IPv4 address with a prefix length (a.b.c.d/n)',
        );
        expect(fs.existsSync(path.join(dir, "refused.yaml"))).toBe(false);
    });

    test("printable: C0, DEL, C1 (NEL), the line and paragraph separators and bidi controls become visible escapes", () => {
        expect(d.printable("a\r\n\x00\x1b\x7f\x85\u2028\u2029\u202e\ufeffb ü名")).toBe(
            "a\\x0d\\x0a\\x00\\x1b\\x7f\\x85\\u{2028}\\u{2029}\\u{202e}\\u{feff}b ü名",
        );
    });
});

describe("the file is read back before it counts", () => {
    const input = () => {
        const hosts = hostsOf([honest(1), honest(2)], false);
        const f = d.chooseFabric(hosts, NAMES);
        return {
            command: "c",
            hosts,
            names: NAMES,
            subnet: f.subnet,
            fabric: f.addrs,
            templatePath: "stacks/Pulumi.local.yaml",
            templateText: TEMPLATE,
            identity: "/k/id",
            knownHosts: "/k/known_hosts",
        };
    };

    test("text a host smuggled past the comment (as a writer of text by hand let it) names the node and field it changed, and the host", () => {
        const i = input();
        const file = s.stackFile(i);
        // what the text-pasting writer made of spark-2's CPU string: a carriage return ends the comment in YAML
        const forged = file.text.replace(
            "    # spark-2: x86_64, 2 CPUs (AMD EPYC 7B13)",
            "    # spark-2: x86_64, 2 CPUs (\r      dockerHost: tcp://203.0.113.9:2375\r    #)",
        );
        expect(forged).not.toBe(file.text);
        expect(() => s.checkStack(forged, file, i)).toThrow(
            /^the stack file read back as go-yaml \(CR, NEL, U\+2028 and U\+2029 as line breaks\): spark-1 \(root@10\.231\.0\.11\): nodes\[0\]\.dockerHost is "tcp:\/\/203\.0\.113\.9:2375", not the discovered \(absent\); the evidence of spark-2 \(root@10\.231\.0\.12\) does not read back as the comment written/,
        );
    });

    test("go-yaml's reading: a NEL in the template's comments that would add a key to Pulumi's view is refused, naming it", () => {
        const i = {
            ...input(),
            templateText: TEMPLATE.replace(
                "  vllm-cluster:backend: ray",
                "  # note\u0085  vllm-cluster:hidden: 1\n  vllm-cluster:backend: ray",
            ),
        };
        expect(() => s.writeStack(path.join(dir, "ls.yaml"), i)).toThrow(
            "the stack file read back as go-yaml (CR, NEL, U+2028 and U+2029 as line breaks): vllm-cluster:hidden is not what discovery took from stacks/Pulumi.local.yaml",
        );
        expect(fs.readdirSync(dir).filter((f) => f.startsWith("ls.yaml"))).toEqual([]);
    });

    test("a template's nested secret is left out by path, naming the command that sets it; its top-level secrets too", () => {
        const text = s.renderStack({
            ...input(),
            templateText: TEMPLATE.replace(
                "      keyFile: /var/lib/vllm-cluster-testbed/tls/api-key.pem",
                "      key:\n        secure: v1:QUJD",
            ).replace("  vllm-cluster:backend: ray\n", "  vllm-cluster:backend: ray\n  vllm-cluster:hfToken:\n    secure: v1:REVG\n"),
        });
        expect(text).not.toMatch(/v1:QUJD|v1:REVG/);
        expect(text).toContain(
            "# vllm-cluster:serve (serve.tls.key): left out, a secret of the template's stack; set it: pulumi config set --secret --path serve.tls.key ...",
        );
        expect(text).toContain(
            "# vllm-cluster:hfToken: left out, a secret of the template's stack; set it: pulumi config set --secret hfToken ...",
        );
        expect((YAML.parse(text) as Config).config["vllm-cluster:serve"]).toMatchObject({
            tls: { certFile: "/var/lib/vllm-cluster-testbed/tls/api-cert.pem" },
        });
    });

    test("strings either YAML version would read as something else are quoted", () => {
        const hosts = hostsOf([honest(1), honest(2)], false);
        const f = d.chooseFabric(hosts, ["0b1", "1_000"]);
        const text = s.renderStack({ ...input(), hosts, names: ["0b1", "1_000"], fabric: f.addrs });
        expect(text).toContain('- name: "0b1"');
        expect(text).toContain('- name: "1_000"');
    });
});

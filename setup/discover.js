#!/usr/bin/env node
// @ts-check
/**
 * npm run discover -- [options] [user@]host[:port][=name] ...
 *
 * Probes each host over SSH (infra/scripts/discover_probe.sh; nothing on a host is changed) and writes a commented
 * stack file, stacks/Pulumi.<stack>.yaml. Host keys are verified against the known_hosts file given; a host not in
 * it is never trusted on first use: its fingerprints and the exact command that pins them are printed, and
 * discovery stops. Any refusal (an unknown or changed host key, an unreachable host, no Docker access, an
 * ambiguous fabric, mixed architectures) names its cause and writes nothing.
 */
"use strict";
const { spawnSync, spawn } = require("child_process");
const fs = require("fs");
const os = require("os");
const path = require("path");
const YAML = require("yaml");
const {
    DiscoveryError,
    printable,
    parseAddr,
    parseProbe,
    probeProblems,
    nodeName,
    chooseFabric,
    checkHosts,
    hostProblem,
} = require("./discovery");
const { writeStack } = require("./discoveryStack");

const ROOT = path.join(__dirname, "..");
const PROBE = path.join(ROOT, "infra", "scripts", "discover_probe.sh");
const USAGE = `usage: npm run discover -- [options] [user@]host[:port][=name] ...

  --known-hosts FILE        host keys to verify against (default ~/.ssh/known_hosts); never trusted on first use
  --identity FILE           the SSH key to log in with, also written to the stack (default ~/.ssh/id_ed25519)
  --stack NAME              writes stacks/Pulumi.NAME.yaml (default: discovered)
  --out FILE                writes FILE instead
  --template FILE           the stack file every section but nodes and ssh is copied from
                            (default stacks/Pulumi.spark.yaml)
  --model-path PATH         where the model lives on the hosts: free disk is probed there (default: the template's)
  --fabric SUBNET           the fabric, when more than one subnet qualifies (e.g. 192.168.200.0/24)
  --fabric-interface NODE=IF  a node's fabric interface, when it has more than one address on the fabric
  --force                   replace an existing stack file
The first host becomes the head. A node is named after its host name unless =name is given.`;

/** @param {string} m @returns {never} */
function refuse(m) {
    throw new DiscoveryError(m);
}

/** @param {string} p */
const expand = (p) => (p.startsWith("~/") ? path.join(os.homedir(), p.slice(2)) : p);

/** @param {string[]} argv */
function parseArgs(argv) {
    /** @type {{ knownHosts: string, identity: string, stack: string, out?: string, template: string, modelPath?: string,
     *   fabric?: string, fabricInterface: Record<string, string>, force: boolean, targets: import("./discovery").Target[] }} */
    const o = {
        knownHosts: "~/.ssh/known_hosts",
        identity: "~/.ssh/id_ed25519",
        stack: "discovered",
        template: path.join("stacks", "Pulumi.spark.yaml"),
        fabricInterface: {},
        force: false,
        targets: [],
    };
    for (let i = 0; i < argv.length; i++) {
        const a = argv[i];
        const value = () => argv[++i] ?? refuse(`${a} needs a value\n\n${USAGE}`);
        switch (a) {
            case "--known-hosts":
                o.knownHosts = value();
                break;
            case "--identity":
                o.identity = value();
                break;
            case "--stack":
                o.stack = value();
                break;
            case "--out":
                o.out = value();
                break;
            case "--template":
                o.template = value();
                break;
            case "--model-path":
                o.modelPath = value();
                break;
            case "--fabric":
                o.fabric = value();
                break;
            case "--fabric-interface": {
                const v = value();
                const m = /^([a-z0-9-]+)=([A-Za-z0-9_.:-]{1,15})$/.exec(v) ?? refuse(`--fabric-interface ${v}: expected NODE=INTERFACE`);
                o.fabricInterface[m[1]] = m[2];
                break;
            }
            case "--force":
                o.force = true;
                break;
            case "-h":
            case "--help":
                console.log(USAGE);
                process.exit(0);
                break;
            default:
                if (a.startsWith("-")) refuse(`unknown option ${a}\n\n${USAGE}`);
                o.targets.push(parseTarget(a));
        }
    }
    if (o.targets.length === 0) refuse(`no hosts given\n\n${USAGE}`);
    if (!/^[A-Za-z0-9_.-]+$/.test(o.stack)) refuse(`--stack ${o.stack}: a stack name is letters, digits, _ . and -`);
    if (o.fabric !== undefined && parseAddr("", o.fabric) === undefined)
        refuse(`--fabric ${printable(o.fabric)}: expected a subnet such as 192.168.200.0/24`);
    return o;
}

/** @param {string} spec @returns {import("./discovery").Target} */
function parseTarget(spec) {
    const m = /^(?:([a-z_][a-z0-9_.-]{0,31})@)?([A-Za-z0-9.-]+)(?::(\d{1,5}))?(?:=([a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?))?$/.exec(spec);
    if (!m) refuse(`${spec}: expected [user@]host[:port][=name] (name: lower-case letters, digits and -)`);
    const port = Number(m[3] ?? 22);
    if (port < 1 || port > 65535) refuse(`${spec}: port ${port} is out of range`);
    return { user: m[1] ?? os.userInfo().username, host: m[2], port, name: m[4], spec };
}

/** @param {string} file @param {string} flag */
function mustRead(file, flag) {
    try {
        fs.accessSync(file, fs.constants.R_OK);
    } catch (e) {
        refuse(`${flag} ${file}: cannot be read (${/** @type {NodeJS.ErrnoException} */ (e).code})`);
    }
}

/** @param {import("./discovery").Target} t */
const knownName = (t) => (t.port === 22 ? t.host : `[${t.host}]:${t.port}`);

/**
 * Hosts missing from known_hosts: their keys as offered now, their fingerprints and the line that pins them.
 * @param {import("./discovery").Target[]} targets @param {string} knownHosts
 */
function unknownHosts(targets, knownHosts) {
    const report = [];
    for (const t of targets) {
        if (spawnSync("ssh-keygen", ["-F", knownName(t), "-f", knownHosts], { stdio: "ignore" }).status === 0) continue;
        const scan = spawnSync("ssh-keyscan", ["-T", "10", "-p", String(t.port), t.host], { encoding: "utf8" });
        const keys = scan.stdout.split("\n").filter((l) => l && !l.startsWith("#"));
        if (keys.length === 0) {
            report.push(
                `${t.spec}: not in ${knownHosts}, and no SSH server answered a key scan on port ${t.port} within 10 s ` +
                    `(unreachable, or not an SSH port)${scan.stderr.trim() ? `: ${lastLine(scan.stderr)}` : ""}`,
            );
            continue;
        }
        const pinned = keys.map((k) => k.replace(/^\S+/, knownName(t)));
        const fps = spawnSync("ssh-keygen", ["-l", "-f", "-"], { input: pinned.join("\n") + "\n", encoding: "utf8" });
        report.push(
            `${t.spec}: not in ${knownHosts}; it offers these host keys:\n` +
                fps.stdout
                    .trim()
                    .split("\n")
                    .map((l) => `    ${l}`)
                    .join("\n") +
                `\n  Compare them with the host's own (on its console: ssh-keygen -lf /etc/ssh/ssh_host_ed25519_key.pub); if they match, pin them:\n` +
                `    printf '%s\\n' ${pinned.map((k) => `'${k}'`).join(" ")} >> ${knownHosts}`,
        );
    }
    return report;
}

/** @param {string} s */
function lastLine(s) {
    return s.trim().split("\n").filter(Boolean).pop() ?? "";
}

/** @param {string} stderr @param {number | null} code @param {{ identity: string, knownHosts: string }} o @param {import("./discovery").Target} t */
function sshCause(stderr, code, o, t) {
    if (/REMOTE HOST IDENTIFICATION HAS CHANGED|Host key verification failed/.test(stderr)) {
        return (
            `its host key does not match the one pinned in ${o.knownHosts}: refused (someone may be in between, or the ` +
            `host was reinstalled; check its key on the console, then replace its line: ssh-keygen -R '${knownName(t)}' -f ${o.knownHosts})`
        );
    }
    if (/Permission denied/.test(stderr)) {
        return `it refused the login: ${o.identity} is not accepted for ${t.user} (${lastLine(stderr)})`;
    }
    if (/Connection refused|timed out|No route to host|Could not resolve|Network is unreachable|Connection closed/.test(stderr)) {
        return `unreachable: ${lastLine(stderr)}`;
    }
    return `ssh failed (exit ${code}): ${lastLine(stderr) || "no message"}`;
}

/**
 * Runs `script` on a host with bash, arguments quoted. Resolves to its stdout; rejects naming the cause.
 * @param {import("./discovery").Target} t @param {{ identity: string, knownHosts: string }} o
 * @param {string} script @param {string[]} args @returns {Promise<string>}
 */
function onHost(t, o, script, args) {
    const quoted = args.map((a) => `'${a.replace(/'/g, `'\\''`)}'`).join(" ");
    const argv = [
        "-o",
        "BatchMode=yes",
        "-o",
        "StrictHostKeyChecking=yes",
        "-o",
        `UserKnownHostsFile=${o.knownHosts}`,
        "-o",
        "GlobalKnownHostsFile=/dev/null",
        "-o",
        "ConnectTimeout=10",
        "-o",
        "IdentitiesOnly=yes",
        "-i",
        o.identity,
        "-p",
        String(t.port),
        "-l",
        t.user,
        "--",
        t.host,
        `bash -s -- ${quoted}`,
    ];
    return new Promise((resolve, reject) => {
        const p = spawn("ssh", argv, { stdio: ["pipe", "pipe", "pipe"] });
        let out = "",
            err = "";
        p.stdout.on("data", (d) => (out += d));
        p.stderr.on("data", (d) => (err += d));
        const timer = setTimeout(() => p.kill("SIGKILL"), 60_000);
        p.on("close", (code) => {
            clearTimeout(timer);
            if (code === 0) resolve(out);
            else reject(new DiscoveryError(`${t.spec}: ${sshCause(err, code, o, t)}`));
        });
        p.stdin.end(script);
    });
}

/** Every host reaches every other at its fabric address (the ssh port: the image and model chains dial it). */
// no-tty: runs on the host under `ssh ... bash -s` with no terminal, so timeout's own process group is harmless there
const REACH = `for peer in "$@"; do timeout 5 bash -c "exec 3<>/dev/tcp/\${peer%:*}/\${peer##*:}" 2>/dev/null || echo "$peer"; done`;

/** @param {string[]} argv */
async function main(argv) {
    const o = parseArgs(argv);
    o.knownHosts = expand(o.knownHosts);
    o.identity = expand(o.identity);
    const out = o.out ?? path.join(ROOT, "stacks", `Pulumi.${o.stack}.yaml`);
    mustRead(o.knownHosts, "--known-hosts");
    mustRead(o.identity, "--identity");
    mustRead(o.template, "--template");
    if (fs.existsSync(out) && !o.force) refuse(`${out} exists: nothing was changed (--force replaces it)`);
    const templateText = fs.readFileSync(o.template, "utf8");
    const tdoc = YAML.parseDocument(templateText);
    if (tdoc.errors.length) refuse(`--template ${o.template}: not a YAML stack file: ${tdoc.errors[0].message}`);
    const tcfg = /** @type {{ config?: Record<string, any> }} */ (tdoc.toJS() ?? {}).config ?? {};
    const modelPath = o.modelPath ?? tcfg["vllm-cluster:model"]?.hostPath;

    const unknown = unknownHosts(o.targets, o.knownHosts);
    if (unknown.length) refuse(`host keys not pinned (discovery never trusts a key on first use):\n${unknown.join("\n")}`);

    const script = fs.readFileSync(PROBE, "utf8");
    const results = await Promise.allSettled(o.targets.map((t) => onHost(t, o, script, modelPath ? [modelPath] : [])));
    const failed = results.flatMap((r) => (r.status === "rejected" ? [String(r.reason.message ?? r.reason)] : []));
    if (failed.length) refuse(failed.join("\n"));
    const hosts = o.targets.map((target, i) => ({
        target,
        probe: parseProbe(/** @type {PromiseFulfilledResult<string>} */ (results[i]).value),
    }));
    const lies = probeProblems(hosts);
    if (lies.length) refuse(`what a host reported is not what such a fact may be (a broken or hostile host):\n${lies.join("\n")}`);
    const names = hosts.map((h) => h.target.name ?? nodeName(h.probe.hostname));
    const problems = hosts.flatMap((h, i) => {
        const p = hostProblem(h);
        return p ? [`${names[i]} (${h.target.spec}): ${p}`] : [];
    });
    if (problems.length) refuse(problems.join("\n"));
    checkHosts(hosts, names);
    const { subnet, addrs } = chooseFabric(hosts, names, o);

    const unreached = await Promise.all(
        hosts.map((h, i) => {
            const peers = hosts.flatMap((p, j) => (j === i ? [] : [`${addrs[j].ip}:${p.target.port}`]));
            return onHost(h.target, o, REACH, peers).then((s) =>
                s
                    .split("\n")
                    .filter(Boolean)
                    .map((p) => `${names[i]} cannot reach ${p} on the fabric (${subnet})`),
            );
        }),
    );
    if (unreached.flat().length) refuse(`the hosts do not reach each other on the fabric:\n${unreached.flat().join("\n")}`);

    writeStack(out, {
        command: `npm run discover -- ${argv.join(" ")}`,
        hosts,
        names,
        subnet,
        fabric: addrs,
        templatePath: o.template,
        templateText,
        identity: o.identity,
        knownHosts: o.knownHosts,
        modelPath: o.modelPath,
    });
    console.log(
        `wrote ${out.startsWith(process.cwd() + path.sep) ? path.relative(process.cwd(), out) : out}: ${hosts.length} nodes, fabric ${subnet}, head ${names[0]}`,
    );
    hosts.forEach((h, i) =>
        console.log(
            `  ${names[i]}: ${h.target.spec}, fabric ${addrs[i].ifname} ${addrs[i].ip}, ` +
                `${h.probe.gpus.length ? `${h.probe.gpus.length} GPU(s)` : "no GPU (CPU build)"}, ${h.probe.arch}`,
        ),
    );
    console.log(`next: review it, then pulumi stack init ${o.stack} && pulumi preview --stack ${o.stack}`);
}

main(process.argv.slice(2)).catch((e) => {
    if (e instanceof DiscoveryError) {
        // messages quote what hosts said (ssh's last line, a peer a host could not reach): printable, line by line
        console.error(`discover: ${e.message.split("\n").map(printable).join("\n")}\nNothing was written.`);
        process.exit(2);
    }
    console.error(e);
    process.exit(1);
});

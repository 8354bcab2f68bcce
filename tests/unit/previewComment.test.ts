/**
 * The pull request's preview comment (setup/gitops/preview-comment.js) from engine events shaped as
 * `pulumi preview --event-log` writes them: the summary, the changes, the policy verdicts and a failure's errors, and
 * nothing the program printed; every secret value the job knows replaced, however it is spelt. The script run by
 * setup/gitops/preview.sh with the real CLI on the simulated hosts: tests/gitops/preview-local.sh.
 */
import { spawnSync } from "child_process";
import * as fs from "fs";
import * as os from "os";
import * as path from "path";

const ROOT = path.join(__dirname, "..", "..");
const SCRIPT = path.join(ROOT, "setup", "gitops", "preview-comment.js");
const PASSPHRASE = "correct horse battery staple 8812";
const STATE_KEY = "AKIAxSECRETxSTATExKEY";
const KEY_PEM =
    "-----BEGIN PRIVATE KEY-----\nMIIEvQIBADANBgkqhkiG9w0BAQEFAASCBKcwggSjAgEAAoIBAQC7\nVJTUt9Us8cKjMzEfYyjiWA4R4\n-----END PRIVATE KEY-----";
const HF_TOKEN = "hf_secret_config_token_77";

const URN = (type: string, name: string) => `urn:pulumi:local::vllm-cluster::${type}::${name}`;

/** Events as the engine logs them for a preview of the local stack (one changed serve argument). */
function events(o: { failed?: boolean; printed?: string; violation?: string } = {}): string {
    const serve = URN("vllm-cluster:index:ServeEndpoint$docker:index/container:Container", "serve-container");
    const e: unknown[] = [
        { preludeEvent: { config: { "vllm-cluster:serve": "[secret]" } } },
        { diagnosticEvent: { prefix: "debug: ", message: `RegisterResource RPC finished: resp: ${KEY_PEM}`, severity: "debug" } },
        { diagnosticEvent: { message: `${o.printed ?? "program output"}\n`, severity: "info" } },
        {
            resourcePreEvent: {
                metadata: { op: "same", urn: URN("pulumi:pulumi:Stack", "vllm-cluster-local"), type: "pulumi:pulumi:Stack" },
                planning: true,
            },
        },
        {
            resourcePreEvent: {
                metadata: {
                    op: "replace",
                    urn: serve,
                    type: "docker:index/container:Container",
                    keys: ["command"],
                    diffs: ["command"],
                    old: { inputs: { command: ["vllm", "serve", "--max-model-len", "512"], envs: ["A=1"] } },
                    new: { inputs: { command: ["vllm", "serve", "--max-model-len", "1024"], envs: ["A=1"] } },
                    detailedDiff: { "command[3]": { kind: "update-replace", inputDiff: true } },
                },
                planning: true,
            },
        },
        {
            resourcePreEvent: {
                metadata: { op: "create-replacement", urn: serve, type: "docker:index/container:Container" },
                planning: true,
            },
        },
        {
            resourcePreEvent: {
                metadata: {
                    op: "update",
                    urn: URN("pulumi-nodejs:dynamic:Resource", "serve-tls-key-file"),
                    type: "pulumi-nodejs:dynamic:Resource",
                    diffs: ["key", "what"],
                    old: { inputs: { key: "[secret]", what: `tls key ${HF_TOKEN}` } },
                    new: { inputs: { key: "[secret]", what: "tls key file on node spark-1" } },
                    detailedDiff: null,
                },
                planning: true,
            },
        },
        {
            resourcePreEvent: {
                metadata: { op: "create", urn: URN("command:remote:Command", "serve-readiness"), type: "command:remote:Command" },
                planning: true,
            },
        },
    ];
    if (o.violation) {
        e.push({
            policyEvent: {
                resourceUrn: serve,
                message: `${o.violation}\n`,
                policyName: "gpu-memory-utilization",
                policyPackName: "vllm-cluster-policies",
                policyPackVersion: "0.1.0",
                enforcementLevel: "mandatory",
            },
        });
    }
    if (o.failed) {
        e.push({
            diagnosticEvent: {
                prefix: "error: ",
                message: `invalid vllm-cluster stack config (1 problem(s)):\n  - serve.tensorParallelSize: 4 is not 2 (key ${STATE_KEY})\n`,
                severity: "error",
            },
        });
    }
    e.push({
        summaryEvent: {
            resourceChanges: { replace: 1, update: 1, create: 1, same: 30 },
            PolicyPacks: { "vllm-cluster-policies|local|policies": "0.1.0" },
            isPreview: true,
            result: o.failed ? "failed" : "succeeded",
        },
    });
    return e.map((x) => JSON.stringify(x)).join("\n") + "\n";
}

/** The stack file: serve.tls.key and hfToken set with --secret (only their `secure:` leaves are secrets). */
const STACK_FILE = `config:
  vllm-cluster:serve:
    port: 8000
    tls:
      cert: "-----BEGIN CERTIFICATE-----\\nMIIB\\n-----END CERTIFICATE-----"
      key:
        secure: v1:AAAA
  vllm-cluster:hfToken:
    secure: v1:BBBB
  vllm-cluster:stateDir: /var/lib/vllm-cluster
`;
/** What `pulumi config --show-secrets --json` prints for it. */
const CONFIG = {
    "vllm-cluster:serve": {
        value: JSON.stringify({ port: 8000, tls: { cert: "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----", key: KEY_PEM } }),
        objectValue: { port: 8000, tls: { cert: "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----", key: KEY_PEM } },
        secret: true,
    },
    "vllm-cluster:hfToken": { value: HF_TOKEN, secret: true },
    "vllm-cluster:stateDir": { value: "/var/lib/vllm-cluster", secret: false },
};

let dir: string;
beforeEach(() => (dir = fs.mkdtempSync(path.join(os.tmpdir(), "vcl-preview-comment-"))));
afterEach(() => fs.rmSync(dir, { recursive: true, force: true }));

function comment(eventText: string, exit = 0, config: unknown = CONFIG): { code: number | null; out: string; err: string } {
    fs.writeFileSync(path.join(dir, "events.jsonl"), eventText);
    fs.writeFileSync(path.join(dir, "Pulumi.local.yaml"), STACK_FILE);
    const args = [
        "--stack",
        "local",
        "--exit",
        String(exit),
        "--events",
        path.join(dir, "events.jsonl"),
        "--stack-file",
        path.join(dir, "Pulumi.local.yaml"),
    ];
    const r = spawnSync("node", [SCRIPT, ...args, "--secret-env", "PULUMI_CONFIG_PASSPHRASE", "--secret-env", "AWS_SECRET_ACCESS_KEY"], {
        input: JSON.stringify(config),
        encoding: "utf8",
        env: { PATH: process.env.PATH, PULUMI_CONFIG_PASSPHRASE: PASSPHRASE, AWS_SECRET_ACCESS_KEY: STATE_KEY },
    });
    return { code: r.status, out: r.stdout, err: r.stderr };
}

test("a passing preview: its marker, the summary, the policy packs and the changes with their properties; nothing the program printed", () => {
    const r = comment(events({ printed: "the program says: hello from the pull request" }));
    expect(r.err).toBe("");
    expect(r.code).toBe(0);
    expect(r.out).toBe(
        [
            "<!-- vllm-cluster-preview:local -->",
            "### `pulumi preview` of stack `local`: passed",
            "",
            "Resources: 1 to replace, 1 to update, 1 to create (30 unchanged).",
            "Policies: vllm-cluster-policies 0.1.0; no violation.",
            "",
            "**Changes**",
            "",
            "```diff",
            "+- replace  docker:index/container:Container  serve-container  (replaced: command changed)",
            '~      command[3]: "512" => "1024"',
            "~  update   pulumi-nodejs:dynamic:Resource  serve-tls-key-file",
            '~      what: "tls key [secret]" => "tls key file on node spark-1"',
            "+  create   command:remote:Command  serve-readiness",
            "```",
            "",
        ].join("\n"),
    );
});

test("every secret the job knows is replaced: the environment's and the stack's secret config, whole, JSON-escaped or line by line", () => {
    const leaks = [PASSPHRASE, STATE_KEY, HF_TOKEN, KEY_PEM, JSON.stringify(KEY_PEM), "VJTUt9Us8cKjMzEfYyjiWA4R4"].join(" | ");
    const r = comment(events({ failed: true, violation: `utilization leaks ${leaks}` }), 255);
    expect(r.code).toBe(0);
    for (const secret of [
        PASSPHRASE,
        STATE_KEY,
        HF_TOKEN,
        "MIIEvQIBADANBgkqhkiG9w0BAQEFAASCBKcwggSjAgEAAoIBAQC7",
        "VJTUt9Us8cKjMzEfYyjiWA4R4",
    ]) {
        expect([secret, r.out.includes(secret)]).toEqual([secret, false]);
    }
    expect(r.out).toContain("[secret]");
    // what is not secret stays: the certificate (public) and the stack's other values
    expect(r.out).toContain("FAILED (exit 255)");
    expect(r.out).toContain("serve.tensorParallelSize: 4 is not 2 (key [secret])");
    expect(r.out).toContain("[mandatory] vllm-cluster-policies gpu-memory-utilization: serve-container");
    // debug lines (which can carry raw values) are never part of it
    expect(r.out).not.toContain("RegisterResource");
});

test("a failure's errors and a violation's message cannot end their code block, whatever they hold", () => {
    const r = comment(events({ violation: "a message with ``` and ```` inside\n## a heading @someone" }));
    const fences = r.out.split("\n").filter((l) => /^`{3,}/.test(l));
    // every block opened is closed by a fence of its own length, longer than any run inside
    expect(fences.length % 2).toBe(0);
    const policy = r.out.slice(r.out.indexOf("**Policy violations**"));
    expect(policy.split("\n")[2]).toBe("`````text");
});

test("no events (a preview that never started) still gives a comment saying so; an unknown argument is refused", () => {
    const r = comment("", 1, {});
    expect(r.out).toContain("FAILED (exit 1)");
    expect(r.out).toContain("Resources: no change.");
    const bad = spawnSync("node", [SCRIPT, "--stack", "local"], { encoding: "utf8", input: "{}" });
    expect(bad.status).toBe(2);
    expect(bad.stderr).toContain("usage: preview-comment.js");
});

test("preview.sh replaces every secret the preview job is given by the workflow", () => {
    const workflow = fs.readFileSync(path.join(ROOT, ".github", "workflows", "pull-request.yml"), "utf8");
    const job = workflow.slice(workflow.indexOf("\n  preview:"), workflow.indexOf("\n  comment:"));
    const given = [...job.matchAll(/^\s+([A-Z_]+): \$\{\{ secrets\.[A-Z_]+ \}\}/gm)].map((m) => m[1]);
    expect(given.length).toBeGreaterThan(0);
    const script = fs.readFileSync(path.join(ROOT, "setup", "gitops", "preview.sh"), "utf8");
    const list = /^SECRET_ENV=\(([^)]*)\)/m.exec(script)![1].split(/\s+/);
    expect(given.filter((n) => !list.includes(n))).toEqual([]);
});

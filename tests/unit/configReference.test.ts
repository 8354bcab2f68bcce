/**
 * docs/configuration.md's reference is generated from the config schema (setup/configReference.js): every key with its
 * type, default, rule and meaning, the meaning being the key's own zod description. The page must be what the schema
 * renders now, every key must carry a description, and the rows must cover the keys the stacks use.
 */
import * as fs from "fs";
import * as path from "path";
import { z } from "zod";
import { clusterFields } from "../../infra/configSchema/cluster";
import { secretFields } from "../../infra/configSchema/secrets";
import { HF_TOKEN_KEY } from "../../infra/config";

type Schemas = { cluster: Record<string, unknown>; secrets: Record<string, unknown> };
// eslint-disable-next-line @typescript-eslint/no-require-imports
const reference = require("../../setup/configReference.js") as {
    PAGE: string;
    MARKERS: { start: string; end: string };
    render: (s: Schemas) => string;
    undescribed: (s: Schemas) => string[];
    allRows: (s: Schemas) => { key: string }[];
};
// eslint-disable-next-line @typescript-eslint/no-require-imports
const docBlock = require("../lib/docBlock.js") as { current: (text: string, m: { start: string; end: string }, page: string) => string };
// eslint-disable-next-line @typescript-eslint/no-require-imports
const yaml = require("js-yaml") as { load(s: string): unknown };

const ROOT = path.join(__dirname, "..", "..");
const schemas: Schemas = { cluster: clusterFields, secrets: secretFields };
const rendered = reference.render(schemas);

test("the page's reference is what the schema renders now (npm run docs)", () => {
    const page = fs.readFileSync(path.join(ROOT, reference.PAGE), "utf8");
    expect(docBlock.current(page, reference.MARKERS, reference.PAGE)).toBe(rendered);
});

test("every key of the schema has a description", () => {
    expect(reference.undescribed(schemas)).toEqual([]);
});

test("a key without a description is named, and the page is not rendered", () => {
    const bare = {
        ...schemas,
        cluster: { ...clusterFields, extra: z.object({ known: z.string().describe("d"), unknown: z.number() }).describe("x") },
    };
    expect(reference.undescribed(bare)).toEqual(["extra.unknown"]);
    expect(() => reference.render(bare)).toThrow("config keys without a description in the schema: extra.unknown");
});

/** Every key path a stack file sets: `serve.tls.certFile`, `nodes[].env` (maps are one key). */
function keysOf(v: unknown, prefix: string, out: Set<string>): void {
    if (Array.isArray(v)) {
        for (const x of v) if (typeof x === "object" && x !== null) keysOf(x, `${prefix}[].`, out);
        return;
    }
    for (const [k, x] of Object.entries(v as Record<string, unknown>)) {
        const key = `${prefix}${k}`;
        out.add(key);
        if (k !== "env" && k !== "args" && typeof x === "object" && x !== null) keysOf(x, `${key}${Array.isArray(x) ? "" : "."}`, out);
    }
}

test("every key the committed stacks set has a row, with its type, default, rule and meaning", () => {
    const rows = new Set(reference.allRows(schemas).map((r) => r.key));
    const used = new Set<string>();
    for (const f of fs.readdirSync(path.join(ROOT, "stacks")).filter((x) => /^Pulumi\..*\.yaml$/.test(x))) {
        const doc = yaml.load(fs.readFileSync(path.join(ROOT, "stacks", f), "utf8")) as { config?: Record<string, unknown> };
        const cfg = Object.fromEntries(
            Object.entries(doc.config ?? {})
                .filter(([k]) => k.startsWith("vllm-cluster:"))
                .map(([k, v]) => [k.slice("vllm-cluster:".length), v]),
        );
        keysOf(cfg, "", used);
    }
    expect(used.size).toBeGreaterThan(30);
    expect([...used].filter((k) => !rows.has(k))).toEqual([]);
    for (const line of rendered.split("\n").filter((l) => l.startsWith("| `"))) expect(line.split(" | ").length).toBe(5);
});

test("the rules come from the schema: a range, an enum, a pattern and a cross-key rule", () => {
    const row = (key: string) => rendered.split("\n").find((l) => l.startsWith(`| \`${key}\` |`)) ?? "";
    expect(row("serve.port")).toMatch(/\| integer \| `8000` \| 1\.\.65535 \(TCP port\); distinct from/);
    expect(row("backend")).toContain("| enum | `ray` | one of `ray`, `native` |");
    expect(row("nodes[].name")).toContain("`^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$`; unique across nodes");
    expect(row("serve.enableAutoToolChoice")).toContain("requires serve.toolCallParser");
    expect(row("memoryGuard.reserve")).toContain("| size | `8g` |");
    expect(row("serve.tensorParallelSize")).toContain("| integer | required |");
});

test("secret keys are listed and marked secret", () => {
    expect(Object.keys(secretFields)).toContain(HF_TOKEN_KEY);
    expect(rendered).toMatch(/^\| `hfToken` \| string, \*\*secret\*\* \| unset \| /m);
});

// @ts-check
/**
 * The configuration reference (docs/configuration.md), generated from the stack config's zod schema
 * (infra/configSchema): every key with its type, its default, its rule and its meaning. Nothing here is written by
 * hand about a key: the meaning is the field's `description`, the rule comes from the field constructors' `rule`
 * metadata, an enum's values and the field's `across` metadata (rules that span keys), the default from parsing an
 * absent value, the type from the schema's own kind. A key without a description is an error.
 *
 * It takes the schema's objects as arguments (`npm run docs` loads the TypeScript modules with setup/tsRequire.js;
 * the unit test imports them through ts-jest), so it reads exactly the schema the program validates with.
 */
"use strict";
const { z } = require("zod");
const { block, cell, markers } = require("../tests/lib/docBlock");

const PAGE = "docs/configuration.md";
const MARKERS = markers("config-reference", "setup/configReference.js", "infra/configSchema");

/**
 * @typedef {{ _zod: { def: any } }} Schema
 * @typedef {{ kind?: string, type?: string, description?: string, secret?: boolean, rules: string[], across: string[],
 *   shape?: Record<string, Schema>, element?: Schema, keyType?: Schema, valueType?: Schema, values?: string[] }} Info
 * @typedef {{ key: string, schema: Schema, info: Info, level: number }} Row
 */

/** @param {string[]} list @param {unknown} v */
function add(list, v) {
    if (typeof v === "string" && !list.includes(v)) list.push(v);
}

/**
 * What a field is, read through the wrappers the constructors put around it (preprocess, default, optional,
 * transform): the outermost description and type win; rules are collected from every layer.
 * @param {Schema} schema @param {Info} [info] @returns {Info}
 */
function inspect(schema, info = { rules: [], across: [] }) {
    const meta = /** @type {Record<string, unknown>} */ (z.globalRegistry.get(/** @type {any} */ (schema)) ?? {});
    if (info.description === undefined && typeof meta.description === "string") info.description = meta.description;
    if (info.type === undefined && typeof meta.type === "string") info.type = meta.type;
    if (meta.secret === true) info.secret = true;
    add(info.rules, meta.rule);
    add(info.across, meta.across);
    const def = schema._zod.def;
    switch (def.type) {
        case "pipe":
            // z.preprocess is a pipe from a transform: the value the user writes meets `out`; any other pipe's
            // input side is what the stack file holds (a transform after it only reshapes the parsed value)
            return inspect(def.in._zod.def.type === "transform" ? def.out : def.in, info);
        case "default":
        case "prefault":
        case "optional":
        case "nullable":
        case "readonly":
        case "catch":
        case "nonoptional":
            return inspect(def.innerType, info);
        case "object":
            return { ...info, kind: "section", shape: def.shape };
        case "array":
            return { ...info, kind: "list", element: def.element };
        case "record":
            return { ...info, kind: "map", keyType: def.keyType, valueType: def.valueType };
        case "enum":
            return { ...info, kind: "enum", values: Object.values(def.entries).map(String) };
        default:
            return { ...info, kind: def.type };
    }
}

/** @param {Info} i @returns {string} */
function typeOf(i) {
    const base =
        i.type ??
        (i.kind === "list" && i.element
            ? `list of ${inspect(i.element).kind === "section" ? "object" : typeOf(inspect(i.element))}s`
            : i.kind === "map"
              ? "map"
              : i.kind === "custom"
                ? "value"
                : (i.kind ?? "value"));
    return i.secret ? `${base}, **secret**` : base;
}

/** @param {Info} i @returns {string[]} the key's rules, one phrase each */
function rulesOf(i) {
    const own = [...(i.values ? [`one of ${i.values.map((v) => `\`${v}\``).join(", ")}`] : []), ...i.rules];
    if (i.kind === "list" && i.element && inspect(i.element).kind !== "section") {
        own.push(...rulesOf(inspect(i.element)).map((r) => `each: ${r}`));
    }
    if (i.kind === "map" && i.keyType && i.valueType) {
        own.push(
            `names: ${rulesOf(inspect(i.keyType)).join(", ") || "any"}`,
            `values: ${rulesOf(inspect(i.valueType)).join(", ") || "any"}`,
        );
    }
    return [...own, ...i.across];
}

/** A size default in docker's syntax (8589934592 -> 8g). @param {number} bytes */
function sizeText(bytes) {
    for (const [unit, n] of /** @type {const} */ ([
        ["t", 4],
        ["g", 3],
        ["m", 2],
        ["k", 1],
    ])) {
        if (bytes !== 0 && bytes % 1024 ** n === 0) return `${bytes / 1024 ** n}${unit}`;
    }
    return String(bytes);
}

/** What the key is when the stack leaves it out: required, unset, or its default. @param {Schema} schema @param {Info} i */
function defaultOf(schema, i) {
    const r = /** @type {any} */ (schema).safeParse(undefined);
    if (!r.success) return "required";
    if (r.data === undefined) return "unset";
    if (i.kind === "section") return "each key's default";
    if (i.type === "size" && typeof r.data === "number") return `\`${sizeText(r.data)}\``;
    return `\`${typeof r.data === "string" ? r.data : JSON.stringify(r.data)}\``;
}

/**
 * Every key under `prefix`, depth first: a section's own row, then its keys; a list of objects (nodes) as `key[]`.
 * @param {Record<string, Schema>} shape @param {string} prefix @param {number} level @returns {Row[]}
 */
function rows(shape, prefix = "", level = 0) {
    return Object.entries(shape).flatMap(([name, schema]) => {
        const key = `${prefix}${name}`;
        const info = inspect(schema);
        const own = { key, schema, info, level };
        if (info.kind === "section" && info.shape) return [own, ...rows(info.shape, `${key}.`, level + 1)];
        const element = info.kind === "list" && info.element ? inspect(info.element) : undefined;
        if (element?.kind === "section" && element.shape) return [own, ...rows(element.shape, `${key}[].`, level + 1)];
        return [own];
    });
}

/** Every key of the stack config and the secret keys, each once. @param {{ cluster: Record<string, Schema>, secrets: Record<string, Schema> }} s */
function allRows(s) {
    return [...rows(s.cluster), ...rows(s.secrets)];
}

/** Keys whose schema carries no description. @param {{ cluster: Record<string, Schema>, secrets: Record<string, Schema> }} s */
function undescribed(s) {
    return allRows(s)
        .filter((r) => !r.info.description)
        .map((r) => r.key);
}

const HEAD = ["| Key | Type | Default | Rule | Meaning |", "| --- | --- | --- | --- | --- |"];

/** @param {Row} r */
const line = (r) =>
    `| \`${r.key}\` | ${cell(typeOf(r.info))} | ${cell(defaultOf(r.schema, r.info))} | ${cell(rulesOf(r.info).join("; "))} | ${cell(
        r.info.description ?? "",
    )} |`;

/**
 * The block: one table per section of the stack config, the top-level keys that are not sections, then the secret
 * keys. Throws naming every key without a description.
 * @param {{ cluster: Record<string, Schema>, secrets: Record<string, Schema> }} s
 */
function render(s) {
    const missing = undescribed(s);
    if (missing.length > 0) throw new Error(`config keys without a description in the schema: ${missing.join(", ")}`);
    const top = rows(s.cluster).filter((r) => r.level === 0);
    const out = [];
    for (const r of top.filter((x) => x.info.kind === "section" || x.info.kind === "list")) {
        const inner = rows({ [r.key]: r.schema }).slice(1);
        out.push(
            `### \`${r.key}\``,
            "",
            `${r.info.description} ${typeOf(r.info)[0].toUpperCase()}${typeOf(r.info).slice(1)}, ${defaultOf(r.schema, r.info)}` +
                `${rulesOf(r.info).length ? `; ${rulesOf(r.info).join("; ")}` : ""}.`,
            "",
            ...HEAD,
            ...inner.map(line),
            "",
        );
    }
    out.push("### Other keys", "", ...HEAD, ...top.filter((x) => x.info.kind !== "section" && x.info.kind !== "list").map(line), "");
    out.push(
        "### Secret keys",
        "",
        "Set with `pulumi config set --secret KEY` (a plain value is refused).",
        "",
        ...HEAD,
        ...rows(s.secrets).map(line),
    );
    return block(MARKERS, out);
}

/** The blocks this generator owns (setup/docs.js). @param {{ cluster: Record<string, Schema>, secrets: Record<string, Schema> }} s */
function blocks(s) {
    return [{ page: PAGE, markers: MARKERS, text: render(s) }];
}

module.exports = { PAGE, MARKERS, render, blocks, undescribed, allRows, inspect, rulesOf, defaultOf };

// @ts-check
/**
 * components/vllmClusterArgs.ts, generated from the stack config's zod schema (infra/configSchema): the typed
 * arguments of VllmCluster, one interface per section, each field with its schema description, rule and default as
 * JSDoc. The same schema validates the stack file and the component's arguments, so the two never drift; Pulumi's
 * component package reads this file's types and JSDoc for the SDKs of other languages (PulumiPlugin.yaml), which allow
 * no union but `T | undefined`: an enum is a string whose values the JSDoc lists and the schema checks.
 *
 * Not in the interface: `serve.tls.key` (the TLS key arrives as the top-level `tlsKey`, an Input, since a secret
 * inside `serve` would make all of `serve` an Output).
 */
"use strict";
const { inspect, rulesOf, defaultOf } = require("./configReference");

const FILE = "components/vllmClusterArgs.ts";

/** Keys of the stack config that are not arguments of the component. */
const NOT_ARGS = new Set(["serve.tls.key"]);

/**
 * The interface of a section, by its key path ("nodes[]" for the list's element). Named ...Options, as pulumi-eks
 * names its nested arguments: the SDKs of other languages add Args to an input type's name (Python's NodeOptionsArgs).
 */
const INTERFACE_NAMES = {
    "": "VllmClusterArgs",
    "nodes[]": "NodeOptions",
    image: "ImageOptions",
    "image.build": "ImageBuildOptions",
    model: "ModelOptions",
    "model.hub": "ModelHubOptions",
    serve: "ServeOptions",
    "serve.tls": "ServeTlsOptions",
    "serve.watchdog": "WatchdogOptions",
    ray: "RayOptions",
    native: "NativeOptions",
    ssh: "SshOptions",
    distribution: "DistributionOptions",
    memoryGuard: "MemoryGuardOptions",
    monitoring: "MonitoringOptions",
    "monitoring.grafana": "GrafanaOptions",
};

/** The component's own arguments besides the config's: the secrets, as Inputs, and which free-form values are secret. */
const EXTRA_ARGS = [
    [
        "The Hugging Face token for model.hub (gated or private repositories), a secret: it reaches the host only on the " +
            "download's stdin.",
        "hfToken?: pulumi.Input<string>;",
    ],
    [
        "The API's TLS private key, PEM text, a secret (with serve.tls.certFile or serve.tls.cert): installed mode 600 on the " +
            "head. Either this or serve.tls.keyFile.",
        "tlsKey?: pulumi.Input<string>;",
    ],
    [
        "Keep every node's env values secret in the state and every diff (the stack program sets it when `nodes` came from " +
            "secret config). Default false.",
        "secretNodeEnv?: boolean;",
    ],
    [
        "Keep serve.extraArgs, and so the serve command, secret in the state and every diff (the stack program sets it when " +
            "`serve` came from secret config). Default false.",
        "secretServeArgs?: boolean;",
    ],
];

/** The section an interface holds, for its JSDoc ("the nodes[] settings"). */
const SECTION_OF = Object.fromEntries(
    Object.entries(INTERFACE_NAMES).map(([path, name]) => [name, path === "" ? "top-level" : `\`${path}\``]),
);

/** @param {string} path */
function interfaceName(path) {
    const name = /** @type {Record<string, string>} */ (INTERFACE_NAMES)[path];
    if (!name) throw new Error(`${FILE}: no interface name for the section ${path}; add it to INTERFACE_NAMES`);
    return name;
}

/**
 * The TypeScript type of a field; sections are emitted as interfaces of their own (into `out`).
 * @param {any} schema @param {string} path @param {Map<string, string[]>} out @returns {string}
 */
function typeOf(schema, path, out) {
    const i = inspect(schema);
    if (i.kind === "section" && i.shape) {
        emit(i.shape, path, out);
        return interfaceName(path);
    }
    if (i.kind === "list" && i.element) return `${typeOf(i.element, `${path}[]`, out)}[]`;
    if (i.kind === "map" && i.valueType) return `{ [name: string]: ${typeOf(i.valueType, `${path}{}`, out)} }`;
    if (i.type === "integer" || i.type === "number" || i.kind === "number") return "number";
    if (i.kind === "boolean") return "boolean";
    // strings, enums (their values are in the JSDoc and checked by the schema) and sizes in docker's syntax
    return "string";
}

/** @param {string} text @returns {string[]} JSDoc lines, wrapped */
function jsdoc(text) {
    const words = text.replace(/\*\//g, "*\\/").split(/\s+/);
    const lines = [];
    let line = "";
    for (const w of words) {
        if (line && line.length + w.length + 1 > 110) {
            lines.push(line);
            line = w;
        } else {
            line = line ? `${line} ${w}` : w;
        }
    }
    if (line) lines.push(line);
    return lines.length === 1 ? [`/** ${lines[0]} */`] : ["/**", ...lines.map((l) => ` * ${l}`), " */"];
}

/** What the JSDoc of a field says: its meaning, its rule, its default. @param {any} schema */
function fieldDoc(schema) {
    const i = inspect(schema);
    const rules = rulesOf(i);
    const def = defaultOf(schema, i);
    const parts = [i.description ?? ""];
    if (rules.length > 0) parts.push(`Rule: ${rules.join("; ")}.`);
    if (def !== "required" && def !== "unset" && def !== "each key's default") parts.push(`Default: ${def.replace(/`/g, "")}.`);
    return parts.join(" ");
}

/**
 * One interface per section, depth first, into `out` (name -> lines).
 * @param {Record<string, any>} shape @param {string} path @param {Map<string, string[]>} out
 */
function emit(shape, path, out) {
    const name = interfaceName(path);
    if (out.has(name)) return;
    out.set(name, []);
    const lines = [];
    for (const [key, schema] of Object.entries(shape)) {
        const keyPath = path === "" ? key : `${path}.${key}`;
        if (NOT_ARGS.has(keyPath)) continue;
        const optional = defaultOf(schema, inspect(schema)) !== "required";
        const type = typeOf(schema, keyPath, out);
        lines.push(...jsdoc(fieldDoc(schema)).map((l) => `    ${l}`), `    ${key}${optional ? "?" : ""}: ${type};`);
    }
    if (path === "") {
        for (const [doc, decl] of EXTRA_ARGS) lines.push(...jsdoc(doc).map((l) => `    ${l}`), `    ${decl}`);
    }
    out.set(name, lines);
}

/** @param {{ cluster: Record<string, any> }} s @returns {string} the file */
function render(s) {
    const out = new Map();
    emit(s.cluster, "", out);
    const docs = {
        VllmClusterArgs:
            "The arguments of a VllmCluster: the hosts, the image, the model, vLLM's serve settings, the backend (Ray or vLLM's own " +
            "multi-node), how hosts copy to each other, the memory guard, and how to reach the hosts over SSH. A stack file " +
            "under `vllm-cluster:` holds the same keys.",
    };
    const body = [...out.entries()].flatMap(([name, lines]) => [
        ...jsdoc(/** @type {Record<string, string>} */ (docs)[name] ?? `The ${SECTION_OF[name]} settings of a VllmCluster.`),
        `export interface ${name} {`,
        ...lines,
        "}",
        "",
    ]);
    return [
        "// Generated by `npm run docs` (setup/componentArgs.js) from the config schema (infra/configSchema): do not edit.",
        'import * as pulumi from "@pulumi/pulumi";',
        "",
        ...body,
    ].join("\n");
}

/** The generated files this generator owns (setup/docs.js). @param {{ cluster: Record<string, any> }} s */
function files(s) {
    return [{ page: FILE, text: render(s) }];
}

module.exports = { FILE, render, files };

/**
 * The stack config: one zod schema per section (infra/configSchema), the types every other module imports derived
 * from them, and the entry points that read and validate it before any resource exists.
 */
import * as pulumi from "@pulumi/pulumi";
import { z } from "zod";
import { clusterSchema } from "./configSchema/cluster";
import type { ClusterConfig } from "./configSchema/cluster";
import type { secretFields } from "./configSchema/secrets";
import { CLUSTER_NAME_RE, DEFAULT_CLUSTER } from "./contract";

export type { Backend, ClusterConfig } from "./configSchema/cluster";
export type { GpuRuntime, NodeConfig } from "./configSchema/nodes";
export type { ImageConfig, ImageSource, MemoryGuardConfig, ModelConfig, NativeConfig, RayConfig, SshConfig } from "./configSchema/sections";
export type { ServeConfig } from "./configSchema/serve";
export type { MonitoringConfig } from "./configSchema/monitoring";
export { isIPv4, isValidSshHost } from "./configSchema/fields";
export { MANAGED_ENV } from "./configSchema/nodes";
export { MANAGED_SERVE_FLAGS } from "./configSchema/serve";

/** Project config namespace; every key below lives under `vllm-cluster:`. */
export const CONFIG_NAMESPACE = "vllm-cluster";

/** Keys that hold YAML structure, which Pulumi hands over as JSON text; the others are plain strings. */
const STRUCTURED_KEYS = new Set(["nodes", "image", "model", "serve", "ray", "native", "ssh", "distribution", "memoryGuard", "monitoring"]);

/** Text that is not JSON stays a string, so the schema names the key ("must be an object") with every other problem. */
function parseStructured(text: string): unknown {
    try {
        return JSON.parse(text);
    } catch {
        return text;
    }
}

/** `nodes[1].env.VLLM_HOST_IP`, `serve.extraArgs[2]`: the key as the stack file spells it. */
function keyPath(path: readonly PropertyKey[]): string {
    return path.map((k, i) => (typeof k === "number" ? `[${k}]` : i === 0 ? String(k) : `.${String(k)}`)).join("");
}

/** One line per problem; an object with several unknown keys gives one line each. */
function problemLines(issue: z.core.$ZodIssue): string[] {
    if (issue.code === "unrecognized_keys") {
        return issue.keys.map((k) => `${keyPath([...issue.path, k])}: unknown key`);
    }
    return [`${keyPath(issue.path)}: ${issue.message}`];
}

/**
 * Validates the raw stack config into a typed ClusterConfig. Pure: no Pulumi runtime, no I/O. Throws one Error
 * that lists every problem as `<key path>: <rule>`, so the operator fixes the stack file in one round. Values of
 * serve.extraArgs and node env are never echoed (they may carry secrets such as a key passed by mistake).
 */
export function validateConfig(raw: unknown, what = `${CONFIG_NAMESPACE} stack config`): ClusterConfig {
    const result = clusterSchema.safeParse(raw);
    if (result.success) {
        return result.data;
    }
    const problems = result.error.issues.flatMap(problemLines);
    throw new Error(`invalid ${what} (${problems.length} problem(s)):\n  - ${problems.join("\n  - ")}`);
}

/**
 * Reads every key of the `vllm-cluster` namespace once and validates it; throws before any resource exists.
 * Keys the schema does not know are read too, so a misspelt top-level key is reported instead of ignored.
 */
export function loadConfig(): ClusterConfig {
    return validateConfig(loadRawConfig());
}

/**
 * Every key of the `vllm-cluster` namespace as the stack file holds it (structured keys parsed from their JSON text),
 * the Hub token left out; throws when a key that cannot stay secret was set with --secret. Not validated.
 */
/**
 * The stack file's cluster name (`vllm-cluster:clusterName`): unset, DEFAULT_CLUSTER, the name every release gave the
 * stack program's cluster. A second stack on the same hosts names its own, which names its containers, its state
 * directory and its resources (docs/component.md, "Two clusters on one set of hosts").
 */
export const CLUSTER_NAME_KEY = "clusterName";

export function loadClusterName(): string {
    const name = new pulumi.Config(CONFIG_NAMESPACE).get(CLUSTER_NAME_KEY);
    if (name === undefined || name === "") return DEFAULT_CLUSTER;
    if (!CLUSTER_NAME_RE.test(name)) {
        throw new Error(
            `invalid ${CONFIG_NAMESPACE} stack config (1 problem(s)):\n  - ${CLUSTER_NAME_KEY}: ${JSON.stringify(name)} must be lower-case ` +
                "letters, digits and dashes, starting with a letter and ending with a letter or digit, at most 32 characters",
        );
    }
    return name;
}

export function loadRawConfig(): Record<string, unknown> {
    const cfg = new pulumi.Config(CONFIG_NAMESPACE);
    const prefix = `${CONFIG_NAMESPACE}:`;
    const keys = Object.keys(pulumi.runtime.allConfig())
        .filter((k) => k.startsWith(prefix))
        .map((k) => k.slice(prefix.length));
    const secrets = plainOnlySecretProblems(keys);
    if (secrets.length > 0) {
        throw new Error(`invalid ${CONFIG_NAMESPACE} stack config (${secrets.length} problem(s)):\n  - ${secrets.join("\n  - ")}`);
    }
    const raw: Record<string, unknown> = {};
    for (const key of keys) {
        if (key === HF_TOKEN_KEY) continue; // a secret, read by loadHfToken only
        if (key === CLUSTER_NAME_KEY) continue; // the component's name, not one of its arguments: loadClusterName
        const text = cfg.get(key);
        if (text !== undefined) {
            raw[key] = STRUCTURED_KEYS.has(key) ? parseStructured(text) : text;
        }
    }
    return raw;
}

/**
 * Which of the free-form fields came from a key set with `pulumi config set --secret`: Pulumi marks the whole top-level
 * key secret (`nodes` when `nodes[1].env.HF_TOKEN` is), never a leaf, so every value of that kind is treated as one.
 */
export interface SecretConfig {
    /** `nodes` holds a secret: every node's `env` values (container environments) are kept secret. */
    nodeEnv: boolean;
    /** `serve` holds a secret: `serve.extraArgs`, so the serve command, is kept secret. */
    serveArgs: boolean;
}

export const NO_SECRET_CONFIG: SecretConfig = { nodeEnv: false, serveArgs: false };

/** Whether a config key holds a secret; the SDK knows it but does not export it, so this fails loudly without it. */
function configKeyIsSecret(key: string): boolean {
    // eslint-disable-next-line @typescript-eslint/no-require-imports
    const runtimeConfig = require("@pulumi/pulumi/runtime/config") as { isConfigSecret?: (k: string) => boolean };
    if (typeof runtimeConfig.isConfigSecret !== "function") {
        throw new Error(
            "@pulumi/pulumi no longer provides runtime/config.isConfigSecret: the program cannot tell secret config from plain; " +
                "refusing to run rather than put a secret in plain text",
        );
    }
    return runtimeConfig.isConfigSecret(`${CONFIG_NAMESPACE}:${key}`);
}

/** The Hub token's config key (model.hub): a secret, never part of ClusterConfig (configSchema/secrets.ts). */
export const HF_TOKEN_KEY: keyof typeof secretFields = "hfToken";

/**
 * The keys that carry a secret into the program as one (nodes: env values; serve: extraArgs and the TLS key; hfToken).
 * Every other key's values land in the state, in resource inputs and on the hosts in clear, so one set with
 * `pulumi config set --secret` is refused rather than quietly decrypted into plain text.
 */
const SECRET_CAPABLE = new Set(["nodes", "serve", HF_TOKEN_KEY]);

/** Why each key set with --secret cannot stay secret, one line each (empty when none). */
export function plainOnlySecretProblems(keys: readonly string[], isSecret: (key: string) => boolean = configKeyIsSecret): string[] {
    return keys
        .filter((k) => !SECRET_CAPABLE.has(k) && isSecret(k))
        .map(
            (k) =>
                `${k}: set with --secret, but its values are stored in the state and on the hosts in clear` +
                (k === "image" ? " (a build argument is also recorded in the image's history)" : "") +
                `: nothing in ${k} may be secret; keep the secret out of it (set ${k} without --secret)`,
        );
}

/**
 * The Hub token for model.hub, as a secret Output, or undefined when unset. Fails closed: a token set in plain
 * text (it would sit in the stack file in clear) or set with nothing to use it is refused before any resource.
 */
export function loadHfToken(cfg: ClusterConfig): pulumi.Output<string> | undefined {
    const config = new pulumi.Config(CONFIG_NAMESPACE);
    if (!(`${CONFIG_NAMESPACE}:${HF_TOKEN_KEY}` in pulumi.runtime.allConfig())) return undefined;
    if (!configKeyIsSecret(HF_TOKEN_KEY)) {
        throw new Error(
            `${HF_TOKEN_KEY}: set it as a secret (pulumi config set --secret ${HF_TOKEN_KEY}); a plain value sits in the stack file in clear`,
        );
    }
    if (!cfg.model.hub) {
        throw new Error(`${HF_TOKEN_KEY}: set, but model.hub is not: nothing would use it`);
    }
    return config.requireSecret(HF_TOKEN_KEY);
}

/** Reads which free-form sections hold a secret (see SecretConfig). */
export function loadSecretConfig(): SecretConfig {
    return { nodeEnv: configKeyIsSecret("nodes"), serveArgs: configKeyIsSecret("serve") };
}

/**
 * serve.shmSize and serve.maxRestarts governed the Ray containers too before ray.shmSize and ray.maxRestarts existed;
 * they still do when those are unset, for this release, and the program says so (same values: nothing is replaced).
 */
export function warnServeKeysForRay(cfg: ClusterConfig): void {
    if (cfg.backend !== "ray") return;
    const moved: string[] = [];
    if (cfg.ray.shmSize === undefined && cfg.serve.shmSize !== undefined) moved.push(`serve.shmSize (${cfg.serve.shmSize}) as ray.shmSize`);
    if (cfg.ray.maxRestarts === undefined && cfg.serve.maxRestarts !== 3)
        moved.push(`serve.maxRestarts (${cfg.serve.maxRestarts}) as ray.maxRestarts`);
    if (moved.length > 0) {
        void pulumi.log.warn(
            `the Ray containers take ${moved.join(" and ")}, since the ray keys are unset; set them under ray: the next release ` +
                "reads serve's keys for serve only",
        );
    }
}

/**
 * VllmCluster's arguments checked before anything is registered: the same zod schema that validates a stack file
 * (infra/configSchema), so a problem reads `<key>: <rule>` whether it came from a stack file or from code; then the
 * secrets, which arrive as Inputs apart from the plain settings.
 */
import * as pulumi from "@pulumi/pulumi";
import { ClusterConfig, SecretConfig, validateConfig } from "../infra/config";
import { CLUSTER_NAME_RE } from "../infra/contract";
import { ServeTls, loadTls } from "../infra/tls";
import type { VllmClusterArgs } from "./vllmClusterArgs";

/** The arguments that carry secrets (Inputs) or say which plain values are secret; every other one is plain settings. */
const SECRET_ARGS = ["hfToken", "tlsKey", "secretNodeEnv", "secretServeArgs"] as const;

/**
 * What stands for serve.tls.key while the settings are validated when the key came as tlsKey: the schema asks for
 * exactly one of serve.tls.key and serve.tls.keyFile, and tlsKey is the former given apart.
 */
const TLS_KEY_GIVEN_APART = "(given as tlsKey)";

/** The checked arguments: the validated settings, the TLS material, the Hub token, which free-form values are secret. */
export interface ClusterArgsCheck {
    cfg: ClusterConfig;
    tls: ServeTls;
    hfToken?: pulumi.Output<string>;
    secrets: SecretConfig;
}

/**
 * Checks a VllmCluster's name and arguments; throws one Error listing every problem, each naming its key. A setting
 * that is an Output (an SDK of another language wraps the whole argument in one when a secret or another resource's
 * output is inside it) cannot be checked or spread over hosts before the program runs, so it is refused naming the way
 * secrets go in.
 */
export function checkClusterArgs(name: string, args: VllmClusterArgs): ClusterArgsCheck {
    if (typeof name !== "string" || !CLUSTER_NAME_RE.test(name)) {
        throw new Error(`VllmCluster name ${JSON.stringify(name)}: must match ${CLUSTER_NAME_RE.source}`);
    }
    if (args === undefined || args === null || typeof args !== "object") {
        throw new Error(`VllmCluster ${name}: no arguments (nodes, image, model, serve and ssh are required)`);
    }
    const plain: Record<string, unknown> = {};
    const outputs: string[] = [];
    for (const [key, value] of Object.entries(args)) {
        if ((SECRET_ARGS as readonly string[]).includes(key)) continue;
        if (pulumi.Output.isInstance(value) || value instanceof Promise) outputs.push(key);
        plain[key] = value;
    }
    if (outputs.length > 0) {
        throw new Error(
            `invalid VllmCluster ${name} arguments (${outputs.length} problem(s)):\n` +
                outputs
                    .map(
                        (k) =>
                            `  - ${k}: must be plain values, not an Output (a secret or another resource's output inside it makes ` +
                            "the whole argument one): pass the TLS key as tlsKey and the Hub token as hfToken, and mark env " +
                            "values or serve.extraArgs secret with secretNodeEnv or secretServeArgs",
                    )
                    .join("\n"),
        );
    }
    if (args.tlsKey !== undefined && isSection(plain.serve) && isSection(plain.serve.tls)) {
        plain.serve = { ...plain.serve, tls: { ...plain.serve.tls, key: TLS_KEY_GIVEN_APART } };
    }
    const cfg = validateConfig(plain, `VllmCluster ${name} arguments`);
    const tls = loadTls(cfg.serve, false, args.tlsKey);
    if (args.hfToken !== undefined && !cfg.model.hub) {
        throw new Error(`VllmCluster ${name}: hfToken is given, but model.hub is not set: nothing would use it`);
    }
    return {
        cfg,
        tls,
        hfToken: args.hfToken === undefined ? undefined : pulumi.secret(pulumi.output(args.hfToken)),
        secrets: { nodeEnv: args.secretNodeEnv === true, serveArgs: args.secretServeArgs === true },
    };
}

function isSection(v: unknown): v is Record<string, unknown> {
    return typeof v === "object" && v !== null && !Array.isArray(v);
}

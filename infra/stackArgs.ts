/**
 * A stack file's `vllm-cluster:` keys as VllmCluster's name and arguments: the settings as written (validated here
 * first, so a problem names the stack file's key), the secrets taken out of them as Inputs (serve.tls.key as tlsKey,
 * hfToken), and which free-form sections came from secret config.
 */
import * as pulumi from "@pulumi/pulumi";
import type { VllmClusterArgs } from "../components/vllmClusterArgs";
import { loadClusterName, loadHfToken, loadRawConfig, loadSecretConfig, validateConfig } from "./config";
import { loadTls } from "./tls";

export interface StackArgs {
    /** The cluster's name: the VllmCluster's resource name (`clusterName`; unset: DEFAULT_CLUSTER). */
    name: string;
    args: VllmClusterArgs;
}

export function loadStackArgs(): StackArgs {
    const name = loadClusterName();
    const raw = loadRawConfig();
    const cfg = validateConfig(raw);
    const secret = loadSecretConfig();
    // serve.tls.key is taken only as a secret (Pulumi marks the whole serve key when one of its values is one)
    const tls = loadTls(cfg.serve, secret.serveArgs);
    const hfToken = loadHfToken(cfg);
    const args = { ...raw } as unknown as VllmClusterArgs;
    let tlsKey: pulumi.Output<string> | undefined;
    if (cfg.serve.tls?.key !== undefined && tls !== undefined) {
        tlsKey = tls.key;
        const serve = raw.serve as { tls: Record<string, unknown> };
        const { key: _key, ...rest } = serve.tls;
        void _key;
        args.serve = { ...(raw.serve as VllmClusterArgs["serve"]), tls: rest };
    }
    return {
        name,
        args: { ...args, tlsKey, hfToken, secretNodeEnv: secret.nodeEnv, secretServeArgs: secret.serveArgs },
    };
}

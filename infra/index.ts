import * as pulumi from "@pulumi/pulumi";
import { ClusterConfig, loadConfig, loadSecretConfig } from "./config";
import { buildCluster } from "./program";
import { redactSdkDebugLog } from "./sdkLogRedaction";
import { ServeTls, loadTls } from "./tls";

// First, before any resource: the SDK's debug log would otherwise put secret outputs into the engine's events.
redactSdkDebugLog();

// Validation throws (listing every problem) before any resource is registered. A RunError prints just the message
// (which names each offending key), not a stack trace into the program's internals.
function validatedConfig(): ClusterConfig {
    try {
        return loadConfig();
    } catch (e) {
        throw new pulumi.RunError(e instanceof Error ? e.message : String(e));
    }
}

/** The TLS files serve.tls names, read before any resource; a bad one fails naming its key. */
function tlsFiles(cfg: ClusterConfig): ServeTls {
    try {
        return loadTls(cfg.serve);
    } catch (e) {
        throw new pulumi.RunError(e instanceof Error ? e.message : String(e));
    }
}

const cfg = validatedConfig();
const cluster = buildCluster(cfg, pulumi.getStack(), loadSecretConfig(), tlsFiles(cfg));

export const endpoint = cluster.endpoint;
export const servedModelName = cluster.servedModelName;
export const apiKey = cluster.apiKey;
export const rayDashboard = cluster.rayDashboard;
export const nodes = cluster.nodes;
export const clusterFingerprint = cluster.clusterFingerprint;

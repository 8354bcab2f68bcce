import * as pulumi from "@pulumi/pulumi";
import { ClusterConfig, loadConfig, loadSecretConfig } from "./config";
import { buildCluster } from "./program";
import { redactSdkDebugLog } from "./sdkLogRedaction";

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

const cluster = buildCluster(validatedConfig(), pulumi.getStack(), loadSecretConfig());

export const endpoint = cluster.endpoint;
export const servedModelName = cluster.servedModelName;
export const apiKey = cluster.apiKey;
export const rayDashboard = cluster.rayDashboard;
export const nodes = cluster.nodes;
export const clusterFingerprint = cluster.clusterFingerprint;

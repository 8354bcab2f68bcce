import * as pulumi from "@pulumi/pulumi";
import { ClusterConfig, loadConfig, loadHfToken, loadSecretConfig } from "./config";
import { buildCluster } from "./program";
import { redactSdkDebugLog } from "./sdkLogRedaction";
import { ServeTls, loadTls } from "./tls";

// First, before any resource: the SDK's debug log would otherwise put secret outputs into the engine's events.
redactSdkDebugLog();

// Validation (listing every problem) and reading the TLS material throw before any resource is registered. A RunError
// prints just the message (which names each offending key), not a stack trace into the program's internals.
function beforeAnyResource<T>(read: () => T): T {
    try {
        return read();
    } catch (e) {
        throw new pulumi.RunError(e instanceof Error ? e.message : String(e));
    }
}

const cfg: ClusterConfig = beforeAnyResource(loadConfig);
const secretConfig = beforeAnyResource(loadSecretConfig);
// serve.tls.key is taken only as a secret: Pulumi marks the whole serve key when one of its values is
const tls: ServeTls = beforeAnyResource(() => loadTls(cfg.serve, secretConfig.serveArgs));
const hfToken = beforeAnyResource(() => loadHfToken(cfg));
const cluster = buildCluster(cfg, pulumi.getStack(), secretConfig, tls, hfToken);

export const endpoint = cluster.endpoint;
export const servedModelName = cluster.servedModelName;
export const apiKey = cluster.apiKey;
export const rayDashboard = cluster.rayDashboard;
export const nodes = cluster.nodes;
export const clusterFingerprint = cluster.clusterFingerprint;
// the commit model.hub downloaded; a stack without model.hub says so (an undefined output draws a warning on every up)
export const modelCommit = cluster.modelCommit ?? "none (model.hub is not set)";

/**
 * The stack program: the stack file's `vllm-cluster:` keys (stacks/Pulumi.<stack>.yaml) are one VllmCluster's
 * arguments. Everything else lives in the component (components/vllmCluster.ts).
 */
import * as pulumi from "@pulumi/pulumi";
import { VllmCluster } from "../components/vllmCluster";
import { redactSdkDebugLog } from "./sdkLogRedaction";
import { loadStackArgs } from "./stackArgs";

// First, before any resource: the SDK's debug log would otherwise put secret outputs into the engine's events.
redactSdkDebugLog();

// A bad key fails before any resource is registered; a RunError prints just the message (which names each key), not a
// stack trace into the program's internals.
function beforeAnyResource<T>(make: () => T): T {
    try {
        return make();
    } catch (e) {
        throw new pulumi.RunError(e instanceof Error ? e.message : String(e));
    }
}

const stack = beforeAnyResource(loadStackArgs);
const cluster = beforeAnyResource(() => new VllmCluster(stack.name, stack.args));

export const endpoint = cluster.endpoint;
export const servedModelName = cluster.servedModelName;
export const apiKey = cluster.apiKey;
export const rayDashboard = cluster.rayDashboard;
export const nodes = cluster.nodes;
export const clusterFingerprint = cluster.clusterFingerprint;
export const modelCommit = cluster.modelCommit;
export const status = cluster.status;
export const launch = cluster.launch;
export const watchdog = cluster.watchdog;
export const monitoring = cluster.monitoring;
export const grafanaAdminPassword = cluster.grafanaAdminPassword;

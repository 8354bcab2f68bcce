import * as pulumi from "@pulumi/pulumi";
import { loadConfig } from "./config";
import { buildCluster } from "./program";

// Validation throws (listing every problem) before any resource is registered.
const cluster = buildCluster(loadConfig(), pulumi.getStack());

export const endpoint = cluster.endpoint;
export const servedModelName = cluster.servedModelName;
export const apiKey = cluster.apiKey;
export const rayDashboard = cluster.rayDashboard;
export const nodes = cluster.nodes;
export const clusterFingerprint = cluster.clusterFingerprint;

import { StackValidationPolicy } from "@pulumi/policy";
import { argv, findVllmFlag } from "./lib/commandLine";
import { LABEL, label, managedContainers } from "./lib/container";
import { VLLM_DEFAULT_UTILIZATION, gpuMemoryUtilizationDefaults } from "./gpuMemoryUtilization";

export interface GpuMemorySharedConfig {
    /** Most of a dedicated-memory host's GPU memory that all clusters on it may reserve together. */
    max: number;
    /** The same on unified-memory hosts (GB10): the operating system, Ray and Docker share that memory. */
    maxUnifiedMemory: number;
}

export const gpuMemorySharedDefaults: GpuMemorySharedConfig = {
    max: gpuMemoryUtilizationDefaults.max,
    maxUnifiedMemory: gpuMemoryUtilizationDefaults.maxUnifiedMemory,
};

interface Share {
    cluster: string;
    fraction: number;
    unified: boolean;
    urn: string;
}

export const gpuMemoryShared: StackValidationPolicy = {
    name: "gpu-memory-shared",
    description:
        "Two clusters on one host (vllm-cluster.cluster) reserve together at most max of its GPU memory " +
        "(--gpu-memory-utilization summed over their serve containers on that node), maxUnifiedMemory on unified-memory hosts.",
    enforcementLevel: "mandatory",
    severity: "high",
    configSchema: {
        properties: {
            max: { type: "number", exclusiveMinimum: 0, maximum: 1, default: gpuMemorySharedDefaults.max },
            maxUnifiedMemory: { type: "number", exclusiveMinimum: 0, maximum: 1, default: gpuMemorySharedDefaults.maxUnifiedMemory },
        },
    },
    validateStack: (args, reportViolation) => {
        const cfg = { ...gpuMemorySharedDefaults, ...args.getConfig<Partial<GpuMemorySharedConfig>>() };
        const byNode = new Map<string, Share[]>();
        for (const { view, role } of managedContainers(args.resources)) {
            if (role !== "serve") continue;
            const node = label(view, LABEL.node);
            const cluster = label(view, LABEL.cluster) ?? "vllm";
            if (typeof node !== "string" || typeof cluster !== "string") continue;
            const flag = findVllmFlag(argv(view), "--gpu-memory-utilization");
            if (flag.kind === "unknown" || flag.kind === "no-value") continue; // gpu-memory-utilization reports these
            const fraction = flag.kind === "value" ? Number(flag.value) : VLLM_DEFAULT_UTILIZATION;
            if (!Number.isFinite(fraction)) continue;
            const shares = byNode.get(node) ?? [];
            byNode.set(node, shares);
            shares.push({ cluster, fraction, unified: label(view, LABEL.unifiedMemory) === "true", urn: view.urn });
        }
        for (const [node, shares] of byNode) {
            if (new Set(shares.map((s) => s.cluster)).size < 2) continue;
            const unified = shares.some((s) => s.unified);
            const max = unified ? Math.min(cfg.max, cfg.maxUnifiedMemory) : cfg.max;
            const sum = shares.reduce((t, s) => t + s.fraction, 0);
            if (sum > max + 1e-9) {
                reportViolation(
                    `node ${node}: the clusters on it reserve ${shares.map((s) => `${s.fraction} (cluster ${s.cluster})`).join(" + ")} = ` +
                        `${+sum.toFixed(4)} of its GPU memory, above ${max}${unified ? " (a unified-memory host)" : ""}. ` +
                        "Lower serve.gpuMemoryUtilization of one of them so that together they fit.",
                    shares[shares.length - 1].urn,
                );
            }
        }
    },
};

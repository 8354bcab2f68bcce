import { ResourceValidationPolicy } from "@pulumi/policy";
import { findVllmFlag, argv } from "./lib/commandLine";
import { GPU_MEMORY_MAX, GPU_MEMORY_MAX_UNIFIED } from "../infra/contract";
import { LABEL, describe, label, serveContainer } from "./lib/container";

export interface GpuMemoryUtilizationConfig {
    /** Lowest accepted fraction; below it the weights and KV cache rarely fit and the value is likely a typo. */
    min: number;
    /** Highest accepted fraction on hosts with dedicated GPU memory. */
    max: number;
    /** Highest accepted fraction on unified-memory hosts (GB10): the OS, Ray and Docker share that memory. */
    maxUnifiedMemory: number;
}

export const gpuMemoryUtilizationDefaults: GpuMemoryUtilizationConfig = {
    min: 0.1,
    max: GPU_MEMORY_MAX,
    maxUnifiedMemory: GPU_MEMORY_MAX_UNIFIED,
};

/** vLLM's own default when the flag is not given. */
export const VLLM_DEFAULT_UTILIZATION = 0.9;

export const gpuMemoryUtilization: ResourceValidationPolicy = {
    name: "gpu-memory-utilization",
    description:
        "vLLM serve containers keep --gpu-memory-utilization within [min, max]; unified-memory hosts (GB10) use the " +
        "lower maxUnifiedMemory because the operating system shares that memory.",
    enforcementLevel: "mandatory",
    severity: "high",
    configSchema: {
        properties: {
            min: { type: "number", exclusiveMinimum: 0, maximum: 1, default: gpuMemoryUtilizationDefaults.min },
            max: { type: "number", exclusiveMinimum: 0, maximum: 1, default: gpuMemoryUtilizationDefaults.max },
            maxUnifiedMemory: {
                type: "number",
                exclusiveMinimum: 0,
                maximum: 1,
                default: gpuMemoryUtilizationDefaults.maxUnifiedMemory,
            },
        },
    },
    validateResource: (args, reportViolation) => {
        const c = serveContainer(args);
        if (c === undefined) return;
        const cfg = { ...gpuMemoryUtilizationDefaults, ...args.getConfig<Partial<GpuMemoryUtilizationConfig>>() };

        const flag = findVllmFlag(argv(c), "--gpu-memory-utilization");
        if (flag.kind === "unknown") return;
        if (flag.kind === "no-value") {
            reportViolation(`${describe(c)}: --gpu-memory-utilization has no value. Set serve.gpuMemoryUtilization.`);
            return;
        }
        const raw = flag.kind === "value" ? flag.value : undefined;
        const value = raw === undefined ? VLLM_DEFAULT_UTILIZATION : Number(raw);
        const shown = raw === undefined ? `vLLM's default ${VLLM_DEFAULT_UTILIZATION} (flag not set)` : raw;
        if (!Number.isFinite(value)) {
            reportViolation(
                `${describe(c)}: --gpu-memory-utilization '${raw}' is not a number. ` +
                    "Set serve.gpuMemoryUtilization to a fraction such as 0.85.",
            );
            return;
        }

        // An unknown unified-memory label falls back to the looser bound: unknowns never cause a violation.
        const unified = label(c, LABEL.unifiedMemory) === "true";
        const max = unified ? Math.min(cfg.max, cfg.maxUnifiedMemory) : cfg.max;
        const why = unified ? " (unified-memory host: GPU and OS share the same memory)" : "";
        if (value > max) {
            reportViolation(
                `${describe(c)}: --gpu-memory-utilization ${shown} is above the maximum ${max}${why}. ` +
                    `Lower serve.gpuMemoryUtilization to at most ${max}.`,
            );
        } else if (value < cfg.min) {
            reportViolation(
                `${describe(c)}: --gpu-memory-utilization ${shown} is below the minimum ${cfg.min}, too little for the ` +
                    `weights and KV cache. Raise serve.gpuMemoryUtilization to at least ${cfg.min}.`,
            );
        }
    },
};

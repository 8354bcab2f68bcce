import { ReportViolation, StackValidationPolicy } from "@pulumi/policy";
import { argv, findVllmFlag } from "./lib/commandLine";
import { ContainerView, LABEL, RAY_ROLES, UNKNOWN, describe, label, managedContainers, parseCount } from "./lib/container";

type Count = { kind: "value"; value: number } | { kind: "unknown" } | { kind: "invalid"; text: string };

/** A parallelism flag of the serve command; absent means vLLM's default of 1. */
function parallelism(c: ContainerView, long: string, short: string): Count {
    const flag = findVllmFlag(argv(c), long, short);
    switch (flag.kind) {
        case "unknown":
            return { kind: "unknown" };
        case "absent":
            return { kind: "value", value: 1 };
        case "no-value":
            return { kind: "invalid", text: `${long} has no value` };
        case "value": {
            const n = parseCount(flag.value);
            return n === undefined || n < 1
                ? { kind: "invalid", text: `${long} '${flag.value}' is not a positive integer` }
                : { kind: "value", value: n };
        }
    }
}

/**
 * Sum of the GPU-holding containers' GPUs (undefined when any of them is not known yet), and "node: n" per container.
 * A label that is not a count is reported.
 */
function offeredGpus(holders: ContainerView[], reportViolation: ReportViolation): { total: number | undefined; perNode: string[] } {
    let total: number | undefined = 0;
    const perNode: string[] = [];
    for (const r of holders) {
        const raw = label(r, LABEL.gpus);
        if (raw === UNKNOWN || raw === undefined) {
            total = undefined;
            continue;
        }
        const n = parseCount(raw);
        if (n === undefined) {
            reportViolation(`${describe(r)}: label ${LABEL.gpus}='${raw}' is not a GPU count. Fix nodes[].gpus.`, r.urn);
            total = undefined;
            continue;
        }
        if (total !== undefined) total += n;
        const node = label(r, LABEL.node);
        perNode.push(`${typeof node === "string" ? node : r.name}: ${n}`);
    }
    return { total, perNode };
}

export const parallelismMatchesGpus: StackValidationPolicy = {
    name: "parallelism-matches-gpus",
    description:
        "The serve command's --tensor-parallel-size x --pipeline-parallel-size equals the GPUs the cluster offers " +
        "(sum of vllm-cluster.gpus over ray-head and ray-worker containers; with no Ray containers, over the native " +
        "backend's serve ranks, which carry vllm-cluster.node-rank) and the serve label vllm-cluster.cluster-gpus; " +
        "otherwise vLLM waits forever for GPUs the cluster cannot provide, or leaves GPUs idle.",
    enforcementLevel: "mandatory",
    severity: "high",
    validateStack: (args, reportViolation) => {
        const containers = managedContainers(args.resources);
        const rayContainers = containers.filter((c) => RAY_ROLES.includes(c.role)).map((c) => c.view);
        // Backend native has no Ray: every node runs one serve rank (labelled with its node rank), and those ranks'
        // GPUs are the cluster's. A serve container without the label is the ray backend's (or a partial stack).
        const nativeRanks = containers.filter((c) => c.role === "serve" && label(c.view, LABEL.nodeRank) !== undefined).map((c) => c.view);
        const native = rayContainers.length === 0 && nativeRanks.length > 0;
        const ray = native ? nativeRanks : rayContainers;
        const offeredBy = native ? "the native serve ranks offer" : "the Ray containers offer";

        const { total: rayGpus, perNode } = offeredGpus(ray, reportViolation);

        for (const { view: s, role } of containers) {
            if (role !== "serve") continue;
            const who = describe(s);
            const tp = parallelism(s, "--tensor-parallel-size", "-tp");
            const pp = parallelism(s, "--pipeline-parallel-size", "-pp");
            for (const p of [tp, pp]) {
                if (p.kind === "invalid")
                    reportViolation(`${who}: ${p.text}. Fix serve.tensorParallelSize / serve.pipelineParallelSize.`, s.urn);
            }
            if (tp.kind !== "value" || pp.kind !== "value") continue;
            const product = tp.value * pp.value;
            const shape = `--tensor-parallel-size ${tp.value} x --pipeline-parallel-size ${pp.value} = ${product}`;
            const fix =
                "Set serve.tensorParallelSize x serve.pipelineParallelSize to the cluster's GPU count, or change nodes[].gpus / the node list.";

            if (ray.length > 0 && rayGpus !== undefined && product !== rayGpus) {
                reportViolation(`${who}: ${shape}, but ${offeredBy} ${rayGpus} GPU(s) (${perNode.join(", ")}). ${fix}`, s.urn);
            }
            const clusterGpus = label(s, LABEL.clusterGpus);
            if (typeof clusterGpus === "string") {
                const n = parseCount(clusterGpus);
                if (n !== product) {
                    reportViolation(
                        `${who}: ${shape}, but label ${LABEL.clusterGpus} says the cluster has ${clusterGpus} GPU(s). ${fix}`,
                        s.urn,
                    );
                }
            }
            // The labels repeat the flags for readers of `docker inspect`; a disagreement means the program is wrong.
            for (const [key, p, flagName] of [
                [LABEL.tensorParallelSize, tp.value, "--tensor-parallel-size"],
                [LABEL.pipelineParallelSize, pp.value, "--pipeline-parallel-size"],
            ] as const) {
                const v = label(s, key);
                if (typeof v === "string" && parseCount(v) !== p) {
                    reportViolation(
                        `${who}: label ${key}='${v}' disagrees with the command's ${flagName} ${p}. ` +
                            "Both are written by the program from serve config: fix the component that sets them.",
                        s.urn,
                    );
                }
            }
        }
    },
};

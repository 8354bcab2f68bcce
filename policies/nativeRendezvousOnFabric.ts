import { StackValidationPolicy } from "@pulumi/policy";
import { argv, findVllmFlag } from "./lib/commandLine";
import { ContainerView, UNKNOWN, describe, managedContainers } from "./lib/container";

/** The container's own fabric IP (VLLM_HOST_IP), or undefined when not set or not known yet. */
function fabricIp(c: ContainerView): string | undefined {
    if (!Array.isArray(c.envs)) return undefined;
    const e = c.envs.find((x): x is string => x !== UNKNOWN && x.startsWith("VLLM_HOST_IP="));
    return e?.slice("VLLM_HOST_IP=".length);
}

/** A flag's value, or undefined when absent or not known yet (then nothing is judged). */
function flag(c: ContainerView, name: string): string | undefined {
    const f = findVllmFlag(argv(c), name);
    return f.kind === "value" ? f.value : undefined;
}

export const nativeRendezvousOnFabric: StackValidationPolicy = {
    name: "native-rendezvous-on-fabric",
    description:
        "With vLLM's own multi-node (backend native) every rank dials rank 0's rendezvous (--master-addr and " +
        "--master-port, PyTorch's TCPStore: unauthenticated, pickled data) at rank 0's own fabric IP (its VLLM_HOST_IP), " +
        "never at a management or other address, so that traffic stays on the fabric.",
    enforcementLevel: "mandatory",
    severity: "high",
    validateStack: (args, reportViolation) => {
        const ranks = managedContainers(args.resources)
            .filter((m) => m.role === "serve" && flag(m.view, "--nnodes") !== undefined)
            .map((m) => m.view);
        const rank0 = ranks.find((c) => flag(c, "--node-rank") === "0");
        const fabric = rank0 === undefined ? undefined : fabricIp(rank0);
        if (rank0 === undefined || fabric === undefined) return;
        for (const c of ranks) {
            const addr = flag(c, "--master-addr");
            if (addr !== undefined && addr !== fabric) {
                reportViolation(
                    `${describe(c)}: --master-addr ${addr} is not rank 0's fabric IP (VLLM_HOST_IP ${fabric} on ` +
                        `${describe(rank0)}): the rendezvous, unauthenticated, would go over another network. Point it at ` +
                        "the head's fabricIp (the program does).",
                    c.urn,
                );
            }
        }
    },
};

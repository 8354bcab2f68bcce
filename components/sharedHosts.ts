/**
 * Several VllmClusters in one program: what they may share. Each cluster names its containers, its state directory
 * and its Pulumi children after itself, so two clusters with different names can run on the same hosts; what they
 * cannot share is checked here before either registers anything: a host port, and more of a host's GPU memory than
 * one cluster may take alone (the policy pack's gpu-memory-utilization bounds). DEFAULT_CLUSTER, the stack program's
 * cluster, keeps the names and the host state every earlier release gave it (its host eviction clears the whole
 * stack), so it shares a program with no other cluster.
 */
import type { ClusterConfig } from "../infra/config";
import { DEFAULT_CLUSTER, GPU_MEMORY_MAX, GPU_MEMORY_MAX_UNIFIED } from "../infra/contract";
import { nodeListenPorts } from "../infra/builders/ports";

/** What one cluster holds on one host (a host is its SSH address and port). */
interface HostClaim {
    cluster: string;
    node: string;
    ports: number[];
    gpuMemoryUtilization: number;
    unifiedMemory: boolean;
}

/** One program's clusters, by name, with what each holds on each host. */
export class SharedHosts {
    private readonly clusters = new Map<string, Map<string, HostClaim>>();

    /**
     * Records the cluster `name` (with its validated config), or throws naming both clusters when it cannot share the
     * program or a host with one recorded before: nothing of it has been registered yet.
     */
    add(name: string, cfg: ClusterConfig): void {
        if (this.clusters.has(name)) return;
        const others = [...this.clusters.keys()];
        if (others.length > 0 && (name === DEFAULT_CLUSTER || others.includes(DEFAULT_CLUSTER))) {
            throw new Error(
                `VllmCluster ${name}: this program already has the cluster ${others.join(", ")}; a cluster named ` +
                    `"${DEFAULT_CLUSTER}" (the stack program's) shares a program with no other: give each cluster its own name`,
            );
        }
        const mine = new Map<string, HostClaim>();
        for (const node of cfg.nodes) {
            mine.set(`${node.sshHost}:${node.sshPort}`, {
                cluster: name,
                node: node.name,
                ports: nodeListenPorts(cfg, node),
                gpuMemoryUtilization: cfg.serve.gpuMemoryUtilization,
                unifiedMemory: node.unifiedMemory,
            });
        }
        const problems: string[] = [];
        for (const [host, claim] of mine) {
            const there = [...this.clusters.values()].map((c) => c.get(host)).filter((c): c is HostClaim => c !== undefined);
            for (const other of there) {
                const clash = claim.ports.filter((p) => other.ports.includes(p));
                if (clash.length > 0) {
                    problems.push(
                        `host ${host} (node ${claim.node}): port ${clash.join(", ")} is also cluster ${other.cluster}'s ` +
                            `(node ${other.node}); give each cluster its own serve.port, ray.*, native.masterPort and monitoring ports`,
                    );
                }
            }
            if (there.length > 0) {
                const all = [claim, ...there];
                const unified = all.some((c) => c.unifiedMemory);
                const max = unified ? GPU_MEMORY_MAX_UNIFIED : GPU_MEMORY_MAX;
                const sum = all.reduce((s, c) => s + c.gpuMemoryUtilization, 0);
                if (sum > max + 1e-9) {
                    problems.push(
                        `host ${host} (node ${claim.node}): serve.gpuMemoryUtilization ${all
                            .map((c) => `${c.gpuMemoryUtilization} (cluster ${c.cluster})`)
                            .join(" + ")} = ${+sum.toFixed(4)} is above ${max}${unified ? " (a unified-memory host)" : ""}; ` +
                            "lower them so that together they fit",
                    );
                }
            }
        }
        if (problems.length > 0) {
            throw new Error(`VllmCluster ${name} shares hosts with another cluster of this program:\n  - ${problems.join("\n  - ")}`);
        }
        this.clusters.set(name, mine);
    }
}

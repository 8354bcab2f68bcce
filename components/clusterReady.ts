import * as pulumi from "@pulumi/pulumi";
import { ClusterReadySpec, clusterReadyCommand } from "../infra/builders/ray";
import { joinFingerprint } from "../infra/builders/vllm";
import { HostCheck } from "../infra/providers/hostCheck";
import { SparkNode } from "./sparkNode";

export interface ClusterReadyArgs {
    /** The head host; the probe runs inside its Ray head container. */
    head: SparkNode;
    /** That container's name (containerNames). */
    headContainer: string;
    /** The head's `<fabric IP>:<gcs port>` output. */
    address: pulumi.Input<string>;
    /** Every node expected in the Ray cluster, with the fabric IP it must register with. */
    nodes: { name: string; fabricIp: string; sshHost: string }[];
    /** GPUs Ray must report in total. */
    gpus: number;
    timeoutSeconds: number;
    /** IDs of every Ray container: a replaced container re-runs the probe. */
    containerIds: pulumi.Input<string>[];
    /** The Roster's version: a host joining or leaving re-runs the probe, after leaving hosts were cleared. */
    roster: pulumi.Input<string>;
}

export interface ClusterReport {
    fingerprint: string;
    nodes: Record<string, string>;
    gpus: number;
}

/**
 * Waits (bounded) until Ray sees every node with its fabric IP and the expected GPU count. Its fingerprint output,
 * which serve takes as input, changes exactly when a Ray container was replaced or a host joined or left (the IDs of
 * the Ray containers and the roster, once the probe passed). A cluster that re-formed on its own, as after a reboot
 * (the same containers, new Ray node IDs), keeps it: serve, whose init waited for the cluster and started again by
 * itself, is not replaced by the next `up --refresh`.
 */
export class ClusterReady extends pulumi.ComponentResource {
    public readonly probe: HostCheck;
    public readonly fingerprint: pulumi.Output<string>;
    public readonly report: pulumi.Output<ClusterReport>;

    constructor(name: string, args: ClusterReadyArgs, opts?: pulumi.ComponentResourceOptions) {
        super("vllm-cluster:index:ClusterReady", name, {}, opts);

        const spec = (address: string, timeoutSeconds: number): ClusterReadySpec => ({
            address,
            nodes: args.nodes,
            gpus: args.gpus,
            timeoutSeconds,
        });
        const address = pulumi.output(args.address);
        // Waits (bounded) on create and whenever a Ray container was replaced; `pulumi refresh` looks once more,
        // so a worker that died or re-registered makes the next `up --refresh` wait again and restart serve.
        this.probe = new HostCheck(
            `${name}-probe`,
            {
                what: `cluster readiness on node ${args.head.node.name}`,
                waitScript: address.apply((a) => clusterReadyCommand(args.head.ssh, spec(a, args.timeoutSeconds), args.headContainer)),
                checkScript: address.apply((a) => clusterReadyCommand(args.head.ssh, spec(a, 0), args.headContainer)),
                triggers: [...args.containerIds, args.roster],
            },
            { parent: this },
        );

        this.report = this.probe.result.apply((out) => parseReport(out));
        this.fingerprint = pulumi
            .all([this.report, pulumi.all(args.containerIds), args.roster])
            .apply(([, ids, roster]) => joinFingerprint([...ids, roster]));

        this.registerOutputs({ fingerprint: this.fingerprint, report: this.report });
    }
}

export function parseReport(stdout: string): ClusterReport {
    const line = stdout.trim().split("\n").pop() ?? "";
    try {
        const r = JSON.parse(line) as ClusterReport;
        if (typeof r.fingerprint === "string" && r.fingerprint !== "") {
            return r;
        }
    } catch {
        // fall through to the error below
    }
    throw new Error(`cluster readiness probe printed no report (last line: ${JSON.stringify(line.slice(0, 200))})`);
}

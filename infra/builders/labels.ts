/** The labels every project container carries: the policy pack reads them (keys: ../contract.ts). */
import type { NodeConfig } from "../config";
import { DEFAULT_CLUSTER, LABEL_PREFIX, Role } from "../contract";

export interface LabelInput {
    stack: string;
    /** The cluster's name: carried as a label unless it is DEFAULT_CLUSTER (whose containers never had one). */
    cluster?: string;
    role: Role;
    node: NodeConfig;
    imageRef: string;
    /** Host ports the container listens on, by name. */
    ports: Record<string, number>;
}

/** Labels every project container carries (the policy pack reads them; names are part of the contract). */
export function containerLabels(a: LabelInput, extra: Record<string, string> = {}): Record<string, string> {
    const base: Record<string, string> = {
        managed: "true",
        stack: a.stack,
        role: a.role,
        node: a.node.name,
        gpus: String(a.node.gpus),
        "gpu-runtime": a.node.gpuRuntime,
        "unified-memory": String(a.node.unifiedMemory),
        "ssh-port": String(a.node.sshPort),
        ports: JSON.stringify(a.ports),
        "image-ref": a.imageRef,
        ...(a.cluster !== undefined && a.cluster !== DEFAULT_CLUSTER ? { cluster: a.cluster } : {}),
        ...extra,
    };
    const out: Record<string, string> = {};
    for (const k of Object.keys(base)) {
        out[`${LABEL_PREFIX}${k}`] = base[k];
    }
    return out;
}

export function labelList(labels: Record<string, string>): { label: string; value: string }[] {
    return Object.keys(labels)
        .sort()
        .map((label) => ({ label, value: labels[label] }));
}

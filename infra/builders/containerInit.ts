/**
 * PID 1 of every project container (infra/scripts/container_init.sh, shipped by content in front of the container's
 * own entrypoint): the crash budget kept on the host's disk, the memory floor, the stop signal answered so the
 * engine brings the container back after a reboot, and the preconditions waited for. Also each node's memory plan:
 * the containers' ceiling and the floor, from memoryGuard and the host's memory.
 */
import * as pulumi from "@pulumi/pulumi";
import type * as docker from "@pulumi/docker";
import type { MemoryGuardConfig, NodeConfig } from "../config";
import { base64, scriptFile, shippedScriptArgv } from "./remoteStep";
import { initHostDir } from "./node";

export { initHostDir } from "./node";

/** Where every container of a node sees the node's init directory (budgets and verdicts), read-write. */
export const INIT_CONTAINER_DIR = "/var/lib/vllm-cluster-init";

/** The floor on unifiedMemory nodes when memoryGuard.minAvailable is unset. */
export const UNIFIED_DEFAULT_FLOOR_BYTES = 4 * 1024 ** 3;

/** Where container_init.sh writes a container's verdict on its host ("<container ID> <text>"). */
export function initStatusHostPath(stateDir: string, node: string, container: string): string {
    return `${initHostDir(stateDir, node)}/${container}.status`;
}

/** The init directory, read-write: a `mounts` bind, so a missing directory fails creation (preflight makes it). */
export function initMount(stateDir: string, node: string): docker.types.input.ContainerMount {
    return { type: "bind", source: initHostDir(stateDir, node), target: INIT_CONTAINER_DIR, readOnly: false };
}

/** A node's memory guard: the ceiling of its containers (MiB, none when undefined) and the floor of MemAvailable. */
export interface NodeMemory {
    /** docker's memory limit in MiB; undefined: none. */
    ceilingMb: pulumi.Input<number | undefined>;
    /** The floor of the host's MemAvailable in KiB; 0: none. */
    floorKib: number;
    checkSeconds: number;
}

/** The host's memory as preflight reports it (KiB). */
export interface HostMemory {
    memTotalKib: number;
}

const MIB = 1024 ** 2;

/**
 * The ceiling (bytes) of the node's containers, plain when the config sets it, from the host's memory (less
 * memoryGuard.reserve) on unifiedMemory nodes otherwise; undefined: none. `own` is a role's own setting
 * (serve.memoryLimit), which wins.
 */
export function ceilingMb(
    node: NodeConfig,
    guard: MemoryGuardConfig,
    host: pulumi.Input<HostMemory>,
    own?: number,
): pulumi.Input<number | undefined> {
    const set = own ?? guard.limit;
    if (set !== undefined) {
        return set === 0 ? undefined : Math.floor(set / MIB);
    }
    if (!node.unifiedMemory) {
        return undefined;
    }
    return pulumi.output(host).apply((h) => derivedCeilingMb(node.name, guard.reserve, h.memTotalKib));
}

/** A unifiedMemory node's default ceiling (MiB): the host's memory less the reserve, at least 512 MiB. */
export function derivedCeilingMb(node: string, reserve: number, memTotalKib: number): number {
    const bytes = memTotalKib * 1024 - reserve;
    if (!(bytes >= 512 * MIB)) {
        throw new Error(
            `node ${node}: memoryGuard.reserve (${Math.round(reserve / MIB)} MiB) leaves no memory for the containers ` +
                `(the host has ${Math.round(memTotalKib / 1024)} MiB); set a smaller memoryGuard.reserve or memoryGuard.limit`,
        );
    }
    return Math.floor(bytes / MIB);
}

/** The floor of the node's MemAvailable, KiB (0: none). */
export function floorKib(node: NodeConfig, guard: MemoryGuardConfig): number {
    const bytes = guard.minAvailable ?? (node.unifiedMemory ? UNIFIED_DEFAULT_FLOOR_BYTES : 0);
    return Math.ceil(bytes / 1024);
}

export function nodeMemory(node: NodeConfig, guard: MemoryGuardConfig, host: pulumi.Input<HostMemory>, own?: number): NodeMemory {
    return { ceilingMb: ceilingMb(node, guard, host, own), floorKib: floorKib(node, guard), checkSeconds: guard.checkSeconds };
}

/** What one container's init waits for and when its command counts as healthy (its budget back to full). */
export interface InitSpec {
    /** Starts allowed without becoming healthy (serve.maxRestarts + 1). */
    maxStarts: number;
    /** Healthy once this URL (inside the container's network: the host's) answers 200. */
    healthyUrl?: string;
    /** Otherwise healthy once it ran this long. */
    stableSeconds?: number;
    /** Wait until this `<host>:<port>` accepts a TCP connection (a Ray worker: the head's GCS). */
    waitTcp?: pulumi.Input<string>;
    /** Wait until this script of infra/scripts/ (Python) exits 0 with the argument (serve: the Ray cluster probe). */
    waitPython?: { script: string; arg: pulumi.Input<string> };
}

/**
 * The container's Entrypoint: container_init.sh with its arguments, then `then` (the container's own entrypoint).
 * An element may be deferred (the ceiling from the host's memory, the head's address).
 */
export function initEntrypoint(
    container: string,
    node: string,
    memory: NodeMemory,
    spec: InitSpec,
    then: readonly string[],
): pulumi.Input<string>[] {
    const ceiling = pulumi.Output.isInstance(memory.ceilingMb)
        ? memory.ceilingMb.apply(ceilingText)
        : ceilingText(memory.ceilingMb as number | undefined);
    const args: pulumi.Input<string>[] = [
        `name=${container}`,
        `node=${node}`,
        `state-dir=${INIT_CONTAINER_DIR}`,
        `max-starts=${spec.maxStarts}`,
        ...(spec.healthyUrl !== undefined ? [`healthy-url=${spec.healthyUrl}`] : []),
        ...(spec.stableSeconds !== undefined ? [`stable-seconds=${spec.stableSeconds}`] : []),
        `min-available-kib=${memory.floorKib}`,
        `check-seconds=${memory.checkSeconds}`,
        prefixed("ceiling=", ceiling),
        ...(spec.waitTcp !== undefined ? [prefixed("wait-tcp=", spec.waitTcp)] : []),
        ...(spec.waitPython !== undefined
            ? [`wait-python=${base64(scriptFile(spec.waitPython.script).text)}`, prefixed("wait-arg=", spec.waitPython.arg)]
            : []),
    ];
    return [...shippedScriptArgv("container_init.sh"), ...args, "--", ...then];
}

function ceilingText(mb: number | undefined): string {
    return mb === undefined ? "none" : `${mb}MiB`;
}

function prefixed(prefix: string, v: pulumi.Input<string>): pulumi.Input<string> {
    return pulumi.Output.isInstance(v) || v instanceof Promise ? pulumi.output(v).apply((s) => `${prefix}${s}`) : `${prefix}${v}`;
}

import { UnknownValueError } from "@pulumi/policy";
import { unknownValue } from "@pulumi/pulumi/runtime/rpc";

/** Pulumi type token of the Docker provider's container resource. */
export const CONTAINER_TYPE = "docker:index/container:Container";

// Label keys and roles are the program's own contract (infra/contract.ts, dependency-free), shared with the pack.
export { LABEL, RAY_ROLES, ROLES as GPU_ROLES } from "../../infra/contract";
export type { Role } from "../../infra/contract";
import { LABEL, Role } from "../../infra/contract";

/**
 * Marks a value the engine could not know yet (preview, or an input computed from another resource's
 * output). Policies must never report a violation on it: it is decided at `up` time, when policies run again.
 */
export const UNKNOWN: unique symbol = Symbol("unknown");
export type Unknown = typeof UNKNOWN;
/** A property as the policy sees it: a value, absent (`undefined`), or not yet known. */
export type Maybe<T> = T | undefined | Unknown;

export function isUnknown(v: unknown): v is Unknown {
    return v === UNKNOWN;
}

/**
 * Reads through the policy framework's unknown-checking proxy. An unknown value throws UnknownValueError on
 * access; left alone that aborts the whole policy with a "can't run during preview" advisory, so we turn it
 * into UNKNOWN and let each check skip just the part it cannot decide. The raw wire sentinel is mapped too,
 * for props that reach us without the proxy.
 */
function read(get: () => unknown): unknown {
    try {
        const v = get();
        return v === unknownValue ? UNKNOWN : v;
    } catch (e) {
        if (e instanceof UnknownValueError) {
            return UNKNOWN;
        }
        throw e;
    }
}

function readString(obj: unknown, key: string): Maybe<string> {
    const v = read(() => (obj as Record<string, unknown>)[key]);
    if (v === UNKNOWN) return UNKNOWN;
    return typeof v === "string" ? v : undefined;
}

function readNumber(obj: unknown, key: string): Maybe<number> {
    const v = read(() => (obj as Record<string, unknown>)[key]);
    if (v === UNKNOWN) return UNKNOWN;
    return typeof v === "number" ? v : undefined;
}

function readBoolean(obj: unknown, key: string): Maybe<boolean> {
    const v = read(() => (obj as Record<string, unknown>)[key]);
    if (v === UNKNOWN) return UNKNOWN;
    return typeof v === "boolean" ? v : undefined;
}

/** Reads an array element by element so one unknown element does not hide the known ones. */
function readArray<T>(obj: unknown, key: string, item: (elem: unknown) => T): Maybe<T[]> {
    const arr = read(() => (obj as Record<string, unknown>)[key]);
    if (arr === UNKNOWN) return UNKNOWN;
    if (!Array.isArray(arr)) return undefined;
    const len = read(() => arr.length);
    if (typeof len !== "number") return UNKNOWN;
    const out: T[] = [];
    for (let i = 0; i < len; i++) {
        out.push(item(read(() => arr[i])));
    }
    return out;
}

function stringItem(elem: unknown): string | Unknown {
    if (elem === UNKNOWN) return UNKNOWN;
    return typeof elem === "string" ? elem : String(elem);
}

export interface MountView {
    target: Maybe<string>;
    source: Maybe<string>;
    type: Maybe<string>;
    readOnly: Maybe<boolean>;
}

export interface VolumeView {
    containerPath: Maybe<string>;
    hostPath: Maybe<string>;
    readOnly: Maybe<boolean>;
}

/** The parts of a docker Container's inputs (or outputs) the policies read, unknowns made explicit. */
export interface ContainerView {
    urn: string;
    name: string;
    /** Label values by key; a key whose value is not known yet maps to UNKNOWN. */
    labels: ReadonlyMap<string, string | Unknown>;
    /** True when the label list itself (or one entry's key) is unknown: any label may be UNKNOWN. */
    labelsIncomplete: boolean;
    command: Maybe<(string | Unknown)[]>;
    entrypoints: Maybe<(string | Unknown)[]>;
    envs: Maybe<(string | Unknown)[]>;
    networkMode: Maybe<string>;
    ipcMode: Maybe<string>;
    /** Docker provider unit: MB. */
    shmSize: Maybe<number>;
    /** The memory ceiling; docker provider unit: MB. */
    memory: Maybe<number>;
    mounts: Maybe<MountView[]>;
    volumes: Maybe<VolumeView[]>;
}

export function viewContainer(props: Record<string, unknown>, urn: string, name: string): ContainerView {
    const labels = new Map<string, string | Unknown>();
    let labelsIncomplete = false;
    const entries = readArray(props, "labels", (e) => e);
    if (entries === UNKNOWN) {
        labelsIncomplete = true;
    } else if (entries !== undefined) {
        for (const entry of entries) {
            if (entry === UNKNOWN) {
                labelsIncomplete = true;
                continue;
            }
            const key = readString(entry, "label");
            if (typeof key !== "string") {
                labelsIncomplete = labelsIncomplete || key === UNKNOWN;
                continue;
            }
            const value = readString(entry, "value");
            labels.set(key, value === UNKNOWN ? UNKNOWN : (value ?? ""));
        }
    }
    return {
        urn,
        name,
        labels,
        labelsIncomplete,
        command: readArray(props, "command", stringItem),
        entrypoints: readArray(props, "entrypoints", stringItem),
        envs: readArray(props, "envs", stringItem),
        networkMode: readString(props, "networkMode"),
        ipcMode: readString(props, "ipcMode"),
        shmSize: readNumber(props, "shmSize"),
        memory: readNumber(props, "memory"),
        mounts: readArray(props, "mounts", (m): MountView => {
            if (m === UNKNOWN) return { target: UNKNOWN, source: UNKNOWN, type: UNKNOWN, readOnly: UNKNOWN };
            return {
                target: readString(m, "target"),
                source: readString(m, "source"),
                type: readString(m, "type"),
                readOnly: readBoolean(m, "readOnly"),
            };
        }),
        volumes: readArray(props, "volumes", (v): VolumeView => {
            if (v === UNKNOWN) return { containerPath: UNKNOWN, hostPath: UNKNOWN, readOnly: UNKNOWN };
            return {
                containerPath: readString(v, "containerPath"),
                hostPath: readString(v, "hostPath"),
                readOnly: readBoolean(v, "readOnly"),
            };
        }),
    };
}

/** A label's value: the string, `undefined` when the label is absent, UNKNOWN when it cannot be known yet. */
export function label(c: ContainerView, key: string): Maybe<string> {
    const v = c.labels.get(key);
    if (v !== undefined) return v;
    return c.labelsIncomplete ? UNKNOWN : undefined;
}

/** The container's role, only when it is known to be a container this project manages. */
export function managedRole(c: ContainerView): Role | undefined {
    if (label(c, LABEL.managed) !== "true") return undefined;
    const role = label(c, LABEL.role);
    return role === "ray-head" || role === "ray-worker" || role === "serve" || role === "monitoring" ? role : undefined;
}

/** The view of a resource that is one of this project's serve containers (a rank of either backend); else undefined. */
export function serveContainer(args: {
    type: string;
    props: Record<string, unknown>;
    urn: string;
    name: string;
}): ContainerView | undefined {
    if (args.type !== CONTAINER_TYPE) return undefined;
    const c = viewContainer(args.props, args.urn, args.name);
    return managedRole(c) === "serve" ? c : undefined;
}

/** How a message names a container: resource name plus node and role when known. */
export function describe(c: ContainerView): string {
    const node = label(c, LABEL.node);
    const role = label(c, LABEL.role);
    const parts = [typeof role === "string" ? role : undefined, typeof node === "string" ? `node ${node}` : undefined]
        .filter((p) => p !== undefined)
        .join(", ");
    return parts ? `container '${c.name}' (${parts})` : `container '${c.name}'`;
}

/** Parses a non-negative integer written as a label value; `undefined` when it is not one. */
export function parseCount(v: string): number | undefined {
    return /^\d+$/.test(v.trim()) ? Number(v.trim()) : undefined;
}

export interface ManagedContainer {
    view: ContainerView;
    role: Role;
}

/** The stack's containers that carry this project's labels, with their role. */
export function managedContainers(
    resources: readonly { type: string; props: Record<string, unknown>; urn: string; name: string }[],
): ManagedContainer[] {
    const out: ManagedContainer[] = [];
    for (const r of resources) {
        if (r.type !== CONTAINER_TYPE) continue;
        const view = viewContainer(r.props, r.urn, r.name);
        const role = managedRole(view);
        if (role !== undefined) out.push({ view, role });
    }
    return out;
}

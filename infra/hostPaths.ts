/**
 * Host paths the program must never mount into a container or keep its state in, shared by config validation and
 * the policy pack (no dependencies, like the contract).
 */
import * as path from "path";

/**
 * Where a host directory may not be, for what the containers mount (the model) and what holds the node's state:
 * the root itself and the system's own trees (inside them, or a parent of them: /run holds docker.sock, which in a
 * container is the host's root after any code execution), home directories (a model copied from there would carry
 * ~/.ssh to every host), and the world-writable temporary file systems that a reboot empties.
 */
export const SYSTEM_TREES: readonly string[] = [
    "/bin",
    "/boot",
    "/dev",
    "/etc",
    "/lib",
    "/lib32",
    "/lib64",
    "/proc",
    "/run",
    "/sbin",
    "/sys",
    "/usr",
    "/var/run",
];

/** Why `p` may not be a host directory of the program, or undefined when it may. */
export function forbiddenHostDir(p: string): string | undefined {
    const norm = path.posix.normalize(p).replace(/\/+$/, "") || "/";
    const within = (root: string) => norm === root || norm.startsWith(`${root}/`);
    const parentOf = (sub: string) => sub === norm || sub.startsWith(`${norm}/`);
    if (norm === "/") return "is the root directory";
    const system = SYSTEM_TREES.find((t) => within(t) || parentOf(t));
    if (system) return `is ${norm === system ? "" : within(system) ? "inside " : "a parent of "}${system}, a system directory`;
    if (norm === "/home" || /^\/home\/[^/]+$/.test(norm) || within("/root")) return "is a home directory (its ~/.ssh would go with it)";
    for (const g of ["/var/lib/docker", "/var/lib/containerd"]) {
        if (within(g) || parentOf(g)) return `is ${within(g) ? "inside" : "a parent of"} ${g}, the container engine's own state`;
    }
    // (/dev/shm is inside /dev, a system tree, and refused above)
    for (const t of ["/tmp", "/var/tmp"]) {
        if (within(t)) return `is inside ${t}, which every local user can write to (and a reboot may empty)`;
    }
    return undefined;
}

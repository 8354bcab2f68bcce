import { ResourceValidationPolicy } from "@pulumi/policy";
import { forbiddenHostDir } from "../infra/hostPaths";
import { CONTAINER_TYPE, UNKNOWN, describe, managedRole, viewContainer } from "./lib/container";

/**
 * Mandatory: no project container mounts a host path that gives it the host: the root, a system tree or a parent of
 * one (/run and /var/run hold docker.sock: with it, any code execution in the container is root on the host), a home
 * directory (~/.ssh), the container engine's state, or a world-writable temporary directory. Config validation
 * refuses such a model.hostPath or stateDir; this catches a container whatever built it.
 */
export const hostMountsSafe: ResourceValidationPolicy = {
    name: "host-mounts-safe",
    description:
        "Project containers mount no host path that hands them the host: /, system trees or their parents (/run holds " +
        "docker.sock), home directories, the container engine's state, /tmp, /var/tmp or /dev/shm.",
    enforcementLevel: "mandatory",
    severity: "critical",
    validateResource: (args, reportViolation) => {
        if (args.type !== CONTAINER_TYPE) return;
        const c = viewContainer(args.props, args.urn, args.name);
        if (managedRole(c) === undefined) return;
        const sources = [
            ...(Array.isArray(c.volumes) ? c.volumes.map((v) => v.hostPath) : []),
            ...(Array.isArray(c.mounts) ? c.mounts.filter((m) => m.type === "bind" || m.type === undefined).map((m) => m.source) : []),
        ];
        for (const source of sources) {
            if (source === undefined || source === UNKNOWN) continue;
            const why = forbiddenHostDir(source);
            if (why !== undefined) {
                reportViolation(`${describe(c)}: mounts host path ${source}, which ${why}. Mount a directory of the program's own.`);
            }
        }
    },
};

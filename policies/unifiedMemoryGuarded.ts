import { ResourceValidationPolicy } from "@pulumi/policy";
import { argv } from "./lib/commandLine";
import { CONTAINER_TYPE, LABEL, UNKNOWN, describe, label, managedRole, viewContainer } from "./lib/container";

/** The word container_init.sh (every project container's PID 1) takes its floor from: `min-available-kib=N`. */
const FLOOR_ARG = "min-available-kib=";

/**
 * On a unified-memory host (GB10: the CPU and the GPU share one memory) a host whose memory runs out freezes with
 * no OOM kill, and only a power cycle brings it back. Every container of the program there needs a ceiling (its
 * memory cgroup limit) and runs under a floor on the host's MemAvailable (the guard that stops it in time, whether
 * or not GPU allocations are charged to its cgroup). The program sets both by default; this catches a stack that
 * turned either off ("0") and a container that bypasses the program's init.
 */
export const unifiedMemoryGuarded: ResourceValidationPolicy = {
    name: "unified-memory-guarded",
    description:
        "Containers on unified-memory hosts (GB10) have a memory ceiling and run under the memory guard's floor on the " +
        "host's MemAvailable (memoryGuard.limit, memoryGuard.minAvailable), so the host cannot freeze on exhausted memory.",
    enforcementLevel: "mandatory",
    severity: "high",
    validateResource: (args, reportViolation) => {
        if (args.type !== CONTAINER_TYPE) return;
        const c = viewContainer(args.props, args.urn, args.name);
        if (managedRole(c) === undefined) return;
        // an unknown label is no violation: it may well read true or false once known
        if (label(c, LABEL.unifiedMemory) !== "true") return;

        const memory = c.memory;
        // unknown at preview when the ceiling comes from the host's memory (preflight): known at up, checked then
        if (memory !== UNKNOWN && !(typeof memory === "number" && memory > 0)) {
            reportViolation(
                `${describe(c)}: no memory ceiling on a unified-memory host (GPU and OS share the same memory: a host ` +
                    "whose memory runs out freezes without an OOM kill). Unset memoryGuard.limit (the default leaves " +
                    "memoryGuard.reserve to the OS) or set it to a size such as 100g.",
            );
        }

        // the monitoring containers run no model: a ceiling bounds them, and the guard's floor stops the model's
        if (managedRole(c) === "monitoring") return;
        const words = argv(c);
        if (words === UNKNOWN) return;
        const floors = (words ?? []).filter((w): w is string => typeof w === "string" && w.startsWith(FLOOR_ARG));
        const kib = floors.length > 0 ? Number(floors[floors.length - 1].slice(FLOOR_ARG.length)) : 0;
        if (!(kib > 0)) {
            reportViolation(
                `${describe(c)}: no memory floor on a unified-memory host: nothing stops it before the host's ` +
                    "MemAvailable runs out. Unset memoryGuard.minAvailable (default 4g there) or set it to a size such as 4g.",
            );
        }
    },
};

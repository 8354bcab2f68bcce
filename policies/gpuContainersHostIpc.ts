import { ResourceValidationPolicy } from "@pulumi/policy";
import { CONTAINER_TYPE, UNKNOWN, describe, managedRole, viewContainer } from "./lib/container";

export interface GpuContainersHostIpcConfig {
    /**
     * Smallest /dev/shm, in MB (the Docker provider's unit), accepted when a container does not share the host's
     * IPC namespace. Docker's default of 64 MB makes NCCL fail and Ray spill its object store to disk.
     */
    minShmSizeMb: number;
}

export const gpuContainersHostIpcDefaults: GpuContainersHostIpcConfig = { minShmSizeMb: 1024 };

export const gpuContainersHostIpc: ResourceValidationPolicy = {
    name: "gpu-containers-host-ipc",
    description:
        "Ray and vLLM containers use host networking (Ray, NCCL and vLLM bind the fabric IP) and either share the " +
        "host's IPC namespace or get a /dev/shm of at least minShmSizeMb (default 1 GiB).",
    enforcementLevel: "mandatory",
    severity: "high",
    configSchema: {
        properties: {
            minShmSizeMb: { type: "integer", minimum: 64, default: gpuContainersHostIpcDefaults.minShmSizeMb },
        },
    },
    validateResource: (args, reportViolation) => {
        if (args.type !== CONTAINER_TYPE) return;
        const c = viewContainer(args.props, args.urn, args.name);
        // the monitoring containers (Prometheus, node exporter) hold no GPU and use neither NCCL nor Ray
        const role = managedRole(c);
        if (role === undefined || role === "monitoring") return;
        const cfg = { ...gpuContainersHostIpcDefaults, ...args.getConfig<Partial<GpuContainersHostIpcConfig>>() };
        const who = describe(c);

        if (c.networkMode !== UNKNOWN && c.networkMode !== "host") {
            reportViolation(
                `${who}: networkMode is ${c.networkMode ?? "unset (Docker's bridge network)"}; Ray, NCCL and vLLM must bind ` +
                    'the host\'s fabric IP. Set networkMode: "host".',
            );
        }

        if (c.ipcMode === "host") return;
        if (c.ipcMode === UNKNOWN || c.shmSize === UNKNOWN) return;
        if (c.shmSize !== undefined && c.shmSize >= cfg.minShmSizeMb) return;
        const shm = c.shmSize === undefined ? "Docker's default 64 MB" : `${c.shmSize} MB`;
        reportViolation(
            `${who}: ipcMode is ${c.ipcMode ?? "unset"} and /dev/shm is ${shm}, below ${cfg.minShmSizeMb} MB; NCCL and ` +
                `Ray's object store need shared memory. Set ipcMode: "host" or shmSize >= ${cfg.minShmSizeMb} (MB).`,
        );
    },
};

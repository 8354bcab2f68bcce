/** The nodes and ssh target the builder tests share: a DGX Spark as the seeds had it, and a simulated host. */
import type { NodeConfig } from "../../infra/config";
import type { SshTarget } from "../../infra/builders/ssh";

export const target: SshTarget = {
    user: "aurora",
    host: "10.1.230.180",
    port: 22,
    privateKeyPath: "~/.ssh/id_ed25519",
    knownHostsFile: "~/.ssh/known_hosts",
};

export const spark1: NodeConfig = {
    name: "spark-1",
    sshHost: "10.1.230.180",
    sshUser: "aurora",
    sshPort: 22,
    fabricIp: "192.168.200.12",
    fabricInterface: "enp1s0f1np1",
    rdmaDevices: ["rocep1s0f1", "roceP2p1s0f1"],
    gpus: 1,
    gpuRuntime: "nvidia",
    unifiedMemory: true,
    role: "head",
    env: {},
};

export const sim: NodeConfig = {
    ...spark1,
    name: "spark-2",
    sshUser: "root",
    sshHost: "10.231.0.12",
    fabricIp: "10.232.0.12",
    fabricInterface: "fabric0",
    rdmaDevices: [],
    gpuRuntime: "none",
    unifiedMemory: false,
};

import * as command from "@pulumi/command";
import * as docker from "@pulumi/docker";
import * as pulumi from "@pulumi/pulumi";
import type { NodeConfig } from "../infra/config";
import { PortOwner, PreflightPeer, preflightCommand } from "../infra/builders/preflight";
import { SshTarget, dockerHostUrl, sshOptions } from "../infra/builders/ssh";
import type { ChainMember } from "../infra/providers/chain";

export interface SparkNodeArgs {
    /** The validated node (plain values: config is validated before any resource exists). */
    node: NodeConfig;
    /** How to reach the node: user, host, port, key and known_hosts file. */
    ssh: SshTarget;
    /** Host directory for per-node state (API key file, Ray session dir); preflight creates it. */
    stateDir: string;
    /** Host ports this node's containers will listen on; preflight fails if another process holds one. */
    ports: readonly number[];
    /** The address the other hosts dial for this host's sshd in a chain copy (distribution.network). */
    peerHost: string;
    /** The hosts this one may forward a chain copy to: preflight checks that it reaches each one's sshd there. */
    peers: readonly PreflightPeer[];
    /** The model directory: preflight checks that a reboot does not empty it (not on tmpfs). */
    modelDir?: string;
    /** The stack and cluster these ports are for: preflight refuses one that another stack's or cluster's container claims. */
    owner?: PortOwner;
}

/** Facts the preflight reports about a host. */
export interface NodeFacts {
    node: string;
    arch: string;
    dockerVersion: string;
    gpusSeen: number;
    /** The host's MemTotal (KiB): the default memory ceiling of a unifiedMemory node leaves memoryGuard.reserve of it. */
    memTotalKib: number;
}

/**
 * One GPU host: a docker provider over ssh:// (host keys verified through sshOpts) and a preflight check that
 * fails naming the host before anything is deployed on it.
 */
export class SparkNode extends pulumi.ComponentResource {
    public readonly provider: docker.Provider;
    public readonly preflight: command.local.Command;
    public readonly facts: pulumi.Output<NodeFacts>;
    /** Host architecture as `uname -m` reports it (e.g. aarch64 on GB10). */
    public readonly arch: pulumi.Output<string>;
    public readonly node: NodeConfig;
    public readonly ssh: SshTarget;
    /** The host directory for per-node state, which preflight creates. */
    public readonly stateDir: string;
    /** This host as a member of a chain copy: reached by the operator at `ssh`, by the host before it at its peer address. */
    public readonly member: ChainMember;

    constructor(name: string, args: SparkNodeArgs, opts?: pulumi.ComponentResourceOptions) {
        super("vllm-cluster:index:SparkNode", name, {}, opts);
        this.node = args.node;
        this.ssh = args.ssh;
        this.stateDir = args.stateDir;
        this.member = { node: args.node.name, target: args.ssh, peerHost: args.peerHost };

        this.provider = new docker.Provider(
            `${name}-docker`,
            { host: dockerHostUrl(args.ssh), sshOpts: sshOptions(args.ssh) },
            { parent: this },
        );

        this.preflight = new command.local.Command(
            `${name}-preflight`,
            { create: preflightCommand(args.ssh, args.node, args.stateDir, args.ports, args.peers, args.modelDir, args.owner) },
            { parent: this },
        );

        const nodeName = args.node.name;
        this.facts = this.preflight.stdout.apply((out) => parseFacts(nodeName, out));
        this.arch = this.facts.apply((f) => f.arch);

        this.registerOutputs({ facts: this.facts, arch: this.arch });
    }
}

/** The preflight prints one JSON line; anything else means the script broke, so say which host. */
export function parseFacts(node: string, stdout: string): NodeFacts {
    const line = stdout.trim().split("\n").pop() ?? "";
    try {
        return JSON.parse(line) as NodeFacts;
    } catch {
        throw new Error(`preflight on node ${node} printed no facts (stdout: ${JSON.stringify(stdout.slice(0, 200))})`);
    }
}

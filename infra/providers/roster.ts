import * as pulumi from "@pulumi/pulumi";
import { runBash, tail } from "./bash";

/** One host of the stack, and the command (local bash, reaching the host over ssh) that clears it of the stack. */
export interface RosterMember {
    name: string;
    /** Removes every container of this stack from the host; exit 255 when ssh cannot reach it. */
    evictScript: string;
}

export interface RosterInputs {
    members: pulumi.Input<RosterMember[]>;
}

interface State {
    members: RosterMember[];
    /** The member names, sorted and joined: what changes exactly when a host joins or leaves. */
    version?: string;
    /** Hosts that left the stack but could not be reached to clear them (their containers may still run). */
    unreachable?: string[];
}

const versionOf = (m: RosterMember[]) =>
    m
        .map((x) => x.name)
        .sort()
        .join(",");

/**
 * The stack's hosts. Pulumi deletes the resources of a host that left the program only at the end of an update,
 * after it has created the replacements of what depends on the host list (the Ray gate, serve): the leaving
 * host's Ray worker or serve rank would still be running and joined to the cluster while they start. When the
 * member list changes, update first clears every leaving host of this stack's containers, and everything that
 * depends on the host list waits for it. A leaving host that cannot be reached is recorded, not fatal: it may be
 * gone for good, and then its containers are gone with it.
 */
export const rosterProvider: pulumi.dynamic.ResourceProvider = {
    async check(_olds: State, news: State) {
        return { inputs: news };
    },

    async diff(_id: string, olds: State, news: State) {
        return versionOf(olds.members) === versionOf(news.members) ? { changes: false } : { changes: true, replaces: [], stables: [] };
    },

    async create(inputs: State) {
        return { id: "roster", outs: { ...inputs, version: versionOf(inputs.members), unreachable: [] } };
    },

    async update(_id: string, olds: State, news: State) {
        const staying = new Set(news.members.map((m) => m.name));
        const unreachable: string[] = [];
        for (const m of olds.members.filter((x) => !staying.has(x.name))) {
            const r = await runBash(m.evictScript);
            if (r.code === 255) {
                unreachable.push(m.name);
            } else if (r.code !== 0) {
                throw new Error(`clearing host ${m.name}, which left the stack, failed (exit ${r.code}):\n${tail(r.stderr, 10)}`);
            }
        }
        return { outs: { ...news, version: versionOf(news.members), unreachable } };
    },

    async delete() {
        // Each host's containers are removed by their own resources on destroy.
    },
};

/** The stack's member hosts; `version` changes exactly when one joins or leaves (after leaving hosts were cleared). */
export class Roster extends pulumi.dynamic.Resource {
    declare public readonly version: pulumi.Output<string>;

    constructor(name: string, args: RosterInputs, opts?: pulumi.CustomResourceOptions) {
        super(rosterProvider, name, { ...args, version: undefined, unreachable: undefined }, opts);
    }
}

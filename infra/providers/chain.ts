/** What the chain resources (image, model) share at run time: members, their known_hosts lines, the diff. */
import * as pulumi from "@pulumi/pulumi";
import { ChainHop, knownHostsLookupScript } from "../builders/chain";
import type { SshTarget } from "../builders/ssh";
import { runBash } from "./bash";

/** One host that takes part in a chain copy, in chain order. */
export interface ChainMember {
    node: string;
    /** How the operator reaches it (the management address). */
    target: SshTarget;
    /** The address the host before it in a chain dials (distribution.network): its fabric IP, or target.host. */
    peerHost?: string;
}

async function knownHostsOf(m: ChainMember): Promise<string[]> {
    const lines = (await runBash(knownHostsLookupScript(m.target))).stdout.split("\n").filter((l) => l.trim() !== "");
    if (lines.length === 0) {
        throw new Error(`no known_hosts entry for node ${m.node} (${m.target.host}) in ${m.target.knownHostsFile}`);
    }
    return lines;
}

/** The members as hops, each with the operator's known_hosts lines for it; fails naming a member without any. */
export function hopsOf(members: ChainMember[]): Promise<ChainHop[]> {
    return Promise.all(members.map(async (m) => ({ ...m, knownHosts: await knownHostsOf(m) })));
}

/** What a chain resource last saw: the source's value (image ID, model digest) and each member's (empty: absent). */
export interface Held {
    source?: string;
    members?: Record<string, string>;
}

/** A chain resource changes when one of its `inputs` changed, or a member did not hold the source's value when last seen. */
export function chainDiff<S extends { members: ChainMember[] }>(
    olds: S,
    news: S,
    inputs: readonly (keyof S)[],
    held: Held,
): pulumi.dynamic.DiffResult {
    const inputsChanged = inputs.some((k) => JSON.stringify(olds[k]) !== JSON.stringify(news[k]));
    const unfilled = news.members.some((m) => !held.source || held.members?.[m.node] !== held.source);
    return { changes: inputsChanged || unfilled, replaces: [], deleteBeforeReplace: false };
}

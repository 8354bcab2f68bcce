import * as pulumi from "@pulumi/pulumi";
import {
    ALL_FILES,
    CHAIN_REFUSED,
    Manifest,
    fileBatches,
    filesToSend,
    manifestDifferences,
    manifestDigest,
    modelChainCopyScript,
    modelManifestCommand,
    parseManifest,
} from "../builders/modelChain";
import { BashResult, runBash, tail } from "./bash";
import { ChainMember, chainDiff, hopsOf } from "./chain";

/** Inputs of a ModelChain: data only; the provider builds its scripts with the pure builders at run time. */
export interface ModelChainInputs {
    /** The model directory, at the same path on every host. */
    hostPath: pulumi.Input<string>;
    /** The host that holds the model. */
    source: pulumi.Input<ChainMember>;
    /** The hosts to fill, in chain order (the source host is not one of them). */
    members: pulumi.Input<ChainMember[]>;
    /** How many streams each link carries at once, the files spread over them (distribution.modelStreams). */
    streams: pulumi.Input<number>;
    /** The commit model.hub downloaded on the source: a new one is copied again (unset without model.hub). */
    hubCommit?: pulumi.Input<string | undefined>;
}

interface State {
    hostPath: string;
    source: ChainMember;
    members: ChainMember[];
    streams?: number;
    hubCommit?: string;
    /** The source's manifest digest (the model's content checksum), its file count and total size. */
    digest?: string;
    files?: number;
    bytes?: number;
    /** Each member's manifest digest as last seen (empty when it has no model directory). */
    digests?: Record<string, string>;
    /** Members the last create/update streamed files to. */
    copied?: string[];
}

/** `landed`: the manifest after a copy, which takes the hashes the member made as the files landed (see the builder). */
async function manifestOf(hostPath: string, m: ChainMember, landed = false): Promise<Manifest> {
    const r = await runBash(modelManifestCommand(m.target, m.node, hostPath, landed));
    if (r.code !== 0) {
        throw new Error(`model manifest of ${hostPath} on node ${m.node} failed (exit ${r.code}):\n${tail(r.stderr)}`);
    }
    try {
        return parseManifest(r.stdout);
    } catch (e) {
        throw new Error(`model manifest of ${hostPath} on node ${m.node}: ${(e as Error).message}`);
    }
}

interface Seen {
    source: Manifest;
    members: Manifest[];
}

async function observe(s: State): Promise<Seen> {
    const [source, ...members] = await Promise.all([s.source, ...s.members].map((m) => manifestOf(s.hostPath, m)));
    return { source, members };
}

/** The outputs that describe what was seen. */
function summary(s: State, seen: Seen): Pick<State, "digest" | "files" | "bytes" | "digests"> {
    return {
        digest: manifestDigest(seen.source),
        files: seen.source.files.size,
        bytes: seen.source.bytes,
        digests: Object.fromEntries(s.members.map((m, i) => [m.node, manifestDigest(seen.members[i])])),
    };
}

/**
 * Runs the chain copy of `files` (or ALL_FILES) to `receivers`, in as many runs as the file list needs, each run as
 * `streams` chains at once that split its files; stops after the first run with a failed stream.
 */
async function copy(s: State, files: string[] | typeof ALL_FILES, receivers: ChainMember[]): Promise<BashResult | undefined> {
    const hops = await hopsOf(receivers);
    const runs: (string[] | typeof ALL_FILES)[] = files === ALL_FILES ? [ALL_FILES] : fileBatches(files);
    for (const batch of runs) {
        // never more streams than files: an empty stream would only cost its connections
        const count = Math.max(1, Math.min(s.streams ?? 1, batch === ALL_FILES ? Infinity : batch.length));
        const shares = Array.from({ length: count }, (_, index) => ({ index, count }));
        const results = await Promise.all(
            shares.map((share) => runBash(modelChainCopyScript(s.source.target, s.hostPath, batch, hops, receivers[0].target, share))),
        );
        // a refusal says the most: it is what the error shows when several streams failed
        const failed = results.find((r) => r.code === CHAIN_REFUSED) ?? results.find((r) => r.code !== 0);
        if (failed) {
            return failed;
        }
    }
    return undefined;
}

/**
 * Streams the files that members lack or hold with other content along the chain of members that need some, then
 * reads every member that differed again; fails naming each one whose manifest still differs, and how.
 */
async function converge(s: State): Promise<State> {
    const where = `model directory ${s.hostPath}`;
    // Hashing the source is the long part of looking (minutes for a model of 100 GB read from disk). When no member
    // holds any file, every one needs every file whatever the hashes say: the stream starts at once and the hashing
    // goes on beside it. The source's own checks (a directory, a file, no broken link) run before it connects on.
    const sourceSeen = manifestOf(s.hostPath, s.source);
    sourceSeen.catch(() => undefined);
    const memberSeen = await Promise.all(s.members.map((m) => manifestOf(s.hostPath, m)));
    const empty = s.members.length > 0 && memberSeen.every((m) => m.files.size === 0);
    const early = empty ? copy(s, ALL_FILES, s.members) : undefined;
    // awaited below; a failure that comes while the source still hashes must not count as unhandled meanwhile
    early?.catch(() => undefined);
    let source: Manifest;
    try {
        source = await sourceSeen;
        if (!source.present) {
            throw new Error(`${where} not present on node ${s.source.node}`);
        }
        if (source.files.size === 0) {
            throw new Error(`${where} on node ${s.source.node} holds no file`);
        }
    } catch (e) {
        // the source's own error says why; the stream (refused by the source's checks, or done) only has to end
        await early?.catch(() => undefined);
        throw e;
    }
    const seen: Seen = { source, members: memberSeen };
    const differs = (m: Manifest) => m.text !== seen.source.text;
    const members = s.members.map((m, i) => ({ ...m, seen: seen.members[i] }));
    const needy = members.filter((m) => differs(m.seen));
    if (needy.length === 0) {
        return { ...s, ...summary(s, seen), copied: [] };
    }
    // A member that differs only by files the source lacks gets nothing: those are left in place, never deleted.
    const receivers = needy.filter((m) => filesToSend(seen.source, [m.seen]).length > 0).map(({ seen: _seen, ...member }) => member);
    const files = filesToSend(
        seen.source,
        needy.map((m) => m.seen),
    );
    const failed = early ? await early : receivers.length > 0 ? await copy(s, files, receivers) : undefined;
    if (failed?.code === CHAIN_REFUSED) {
        throw new Error(`${where} from node ${s.source.node}: the chain copy was refused (exit ${failed.code}):\n${tail(failed.stderr)}`);
    }
    // only the members that differed are looked at again (one ssh each), every file listed from disk; a file hashed
    // as it landed and untouched since is not hashed again
    const now = new Map(await Promise.all(needy.map(async (m) => [m.node, await manifestOf(s.hostPath, m, true)] as const)));
    const wrong = needy.filter((m) => differs(now.get(m.node)!));
    if (wrong.length > 0) {
        const how = wrong.map((m) => `node ${m.node}: ${manifestDifferences(seen.source, now.get(m.node)!)}`);
        const log = failed ? ` (chain copy exit ${failed.code}):\n${tail(failed.stderr)}` : "";
        throw new Error(`${where} from node ${s.source.node} differs after the chain copy on ${how.join("; ")}${log}`);
    }
    const after: Seen = { source: seen.source, members: members.map((m) => now.get(m.node) ?? m.seen) };
    return { ...s, ...summary(s, after), copied: receivers.map((m) => m.node) };
}

/**
 * The model directory of the source host on every member host, copied along one chain (../builders/modelChain.ts).
 * read reads every host's manifest again, so `pulumi refresh` notices a member whose files changed or went
 * missing, and new content on the source (a new digest, which the containers carry); diff then reports a change
 * and update copies what differs. delete leaves the files on the hosts.
 */
export const modelChainProvider: pulumi.dynamic.ResourceProvider = {
    async check(_olds: State, news: State) {
        return { inputs: news };
    },

    async diff(_id: string, olds: State, news: State) {
        return chainDiff(olds, news, ["hostPath", "source", "members", "hubCommit"], { source: olds.digest, members: olds.digests });
    },

    async create(inputs: State) {
        const outs = await converge(inputs);
        return { id: `${inputs.hostPath}@${inputs.source.node}`, outs };
    },

    async update(_id: string, _olds: State, news: State) {
        return { outs: await converge(news) };
    },

    async read(id: string, props?: State) {
        if (!props) {
            throw new Error(`cannot read model chain ${id} without its recorded state`);
        }
        return { id, props: { ...props, ...summary(props, await observe(props)) } };
    },

    async delete() {
        // Leaves the model files on the hosts: they may be shared with other uses, and are costly to bring back.
    },
};

/** One chain copy of the model directory to every member host (skipping those that match), and its digest. */
export class ModelChain extends pulumi.dynamic.Resource {
    /** sha256 of the source's manifest: the model's content checksum, which the containers carry as data. */
    declare public readonly digest: pulumi.Output<string>;
    declare public readonly files: pulumi.Output<number>;
    declare public readonly bytes: pulumi.Output<number>;
    declare public readonly digests: pulumi.Output<Record<string, string>>;
    declare public readonly copied: pulumi.Output<string[]>;

    constructor(name: string, args: ModelChainInputs, opts?: pulumi.CustomResourceOptions) {
        const outs = { digest: undefined, files: undefined, bytes: undefined, digests: undefined, copied: undefined };
        super(modelChainProvider, name, { ...args, ...outs }, opts);
    }
}

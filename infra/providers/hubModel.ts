import * as pulumi from "@pulumi/pulumi";
import { hubDownloadCommand, hubRevisionUrl } from "../builders/hub";
import type { SshTarget } from "../builders/ssh";
import { runBash, tail } from "./bash";

/**
 * Inputs of a HubModel. The token travels as a secret input (encrypted in the state with the stack's secrets) and
 * reaches the host only on the download's stdin.
 */
export interface HubModelInputs {
    node: pulumi.Input<string>;
    target: pulumi.Input<SshTarget>;
    repo: pulumi.Input<string>;
    revision: pulumi.Input<string>;
    /** The Hub's address (hubEndpoint: model.hub.endpoint, else the operator's HF_ENDPOINT, else the Hub's own). */
    endpoint: pulumi.Input<string>;
    hostPath: pulumi.Input<string>;
    /** The image the download runs in: its ID on the node (huggingface_hub is in every vLLM image). */
    image: pulumi.Input<string>;
    /** The download script (infra/scripts/hub_download.py). */
    script: pulumi.Input<string>;
    token?: pulumi.Input<string | undefined>;
}

interface State {
    node: string;
    target: SshTarget;
    repo: string;
    revision: string;
    endpoint: string;
    hostPath: string;
    image: string;
    script: string;
    token?: string;
    /** The commit the revision named when checked (check), and the one downloaded (create/update). */
    commit?: string;
    files?: number;
    bytes?: number;
    /** Files the last create/update fetched (none when every file was already in place with the Hub's checksum). */
    fetched?: string[];
}

/** What makes the model another one: a changed image, script or token fetches nothing again. */
const COMPARED = ["node", "repo", "commit", "hostPath"] as const;

/**
 * Asks the Hub what `revision` of `repo` is, from the operator, before any host is touched: a wrong revision, a
 * missing repo or a refused token fails here (in `preview` too) naming the cause.
 */
async function resolve(s: State): Promise<string> {
    const url = hubRevisionUrl(s.endpoint, s.repo, s.revision);
    let res: Response;
    try {
        res = await fetch(url, { headers: s.token ? { authorization: `Bearer ${s.token}` } : {}, signal: AbortSignal.timeout(30_000) });
    } catch (e) {
        throw new Error(`model.hub: cannot reach the Hub at ${new URL(url).origin}: ${(e as Error).cause ?? (e as Error).message}`);
    }
    const code = res.headers.get("x-error-code") ?? "";
    if (res.ok) {
        const sha = ((await res.json()) as { sha?: string }).sha;
        if (!sha || !/^[0-9a-f]{40}$/.test(sha)) throw new Error(`model.hub: the Hub gave no commit for ${s.repo}@${s.revision}`);
        return sha;
    }
    if (code === "RevisionNotFound") throw new Error(`model.hub.revision: ${s.revision} is not a revision of ${s.repo}`);
    if (code === "RepoNotFound" || (res.status === 404 && !code)) {
        throw new Error(`model.hub.repo: no repo ${s.repo} on the Hub${s.token ? "" : " (or it is private: set the secret hfToken)"}`);
    }
    if (res.status === 401 && s.token) throw new Error(`hfToken: the Hub refused the token for ${s.repo} (401: invalid or expired)`);
    if (res.status === 401 || code === "GatedRepo") throw new Error(`model.hub.repo: ${s.repo} needs a token: set the secret hfToken`);
    throw new Error(`model.hub: the Hub answered ${res.status} for ${s.repo}@${s.revision}`);
}

async function download(s: State): Promise<Partial<State>> {
    const r = await runBash(hubDownloadCommand(s), {}, s.token ?? "");
    if (r.code !== 0) {
        throw new Error(`model.hub: downloading ${s.repo}@${s.commit} on node ${s.node} failed (exit ${r.code}):\n${tail(r.stderr)}`);
    }
    const line = r.stdout.trim().split("\n").pop() ?? "";
    const out = JSON.parse(line) as { commit: string; files: number; bytes: number; fetched: string[] };
    return { commit: out.commit, files: out.files, bytes: out.bytes, fetched: out.fetched };
}

/** The state without the token: outputs carry none (the input stays, encrypted as a secret). */
function withoutToken(s: State): State {
    const { token: _token, ...rest } = s;
    return rest;
}

/**
 * The model from the Hub on one node. check resolves the revision to its commit at the Hub (so a branch that moved
 * shows as a change); create/update download what is missing or not the Hub's, verified file by file; delete leaves
 * the files (the model chain and the containers may still use them, and 100 GB is the costly direction).
 */
export const hubModelProvider: pulumi.dynamic.ResourceProvider = {
    async check(_olds: State, news: State) {
        try {
            return { inputs: { ...news, commit: await resolve(news) } };
        } catch (e) {
            const property = /^hfToken/.test((e as Error).message) ? "token" : /revision/.test((e as Error).message) ? "revision" : "repo";
            return { inputs: news, failures: [{ property, reason: (e as Error).message }] };
        }
    },

    async diff(_id: string, olds: State, news: State) {
        const changed = COMPARED.filter((k) => olds[k] !== news[k]);
        return { changes: changed.length > 0, replaces: [], deleteBeforeReplace: false };
    },

    async create(inputs: State) {
        return { id: `${inputs.node}:${inputs.repo}`, outs: withoutToken({ ...inputs, ...(await download(inputs)) }) };
    },

    async update(_id: string, _olds: State, news: State) {
        return { outs: withoutToken({ ...news, ...(await download(news)) }) };
    },

    async delete() {
        // Leaves the model in place (see above).
    },
};

/** The model `repo`@`revision` downloaded on one node; `commit` is the commit it resolved to. */
export class HubModel extends pulumi.dynamic.Resource {
    declare public readonly commit: pulumi.Output<string>;
    declare public readonly fetched: pulumi.Output<string[]>;

    constructor(name: string, args: HubModelInputs, opts?: pulumi.CustomResourceOptions) {
        super(
            hubModelProvider,
            name,
            { ...args, commit: undefined, files: undefined, bytes: undefined, fetched: undefined },
            {
                ...opts,
                additionalSecretOutputs: ["token"],
            },
        );
    }
}

import * as pulumi from "@pulumi/pulumi";
import { runBash, tail } from "./bash";

/**
 * Inputs of a ServeArgsCheck: the serve command of one serve container (its Cmd, ["vllm", "serve", ...]), the image
 * that will run it on its host, and the local bash command line that checks one against the other there
 * (infra/scripts/serve_args_check.sh over ssh, the command on its stdin).
 */
export interface ServeArgsCheckInputs {
    /** For messages: "serve arguments on node spark-1". */
    what: pulumi.Input<string>;
    node: pulumi.Input<string>;
    /** The image ID on that host. */
    image: pulumi.Input<string>;
    command: pulumi.Input<pulumi.Input<string>[]>;
    checkScript: pulumi.Input<string>;
    /** The command carries values from secret config: a refused value is not shown. */
    secretArgs: pulumi.Input<boolean>;
}

interface State {
    what: string;
    node: string;
    image: string;
    command: string[];
    checkScript: string;
    secretArgs: boolean;
    /** The image's vLLM version, as the check found it. */
    vllm?: string;
}

/** What the check script prints. */
interface Verdict {
    ok: boolean;
    vllm: string | null;
    error?: string;
    flag?: string;
    value?: string;
    accepted?: string[];
}

/** The engine's placeholder for a value a preview does not know yet (an image still to be copied, say). */
const UNKNOWN = "04da6b54-80e4-46f7-96ec-b56ff0331ba9";

function known(v: unknown): boolean {
    if (v === UNKNOWN) return false;
    if (Array.isArray(v)) return v.every(known);
    if (v !== null && typeof v === "object") return Object.values(v).every(known);
    return true;
}

/** The refusal as a person reads it: which node, which flag, what the image's vLLM accepts, that nothing was touched. */
export function refusalText(s: Pick<State, "node" | "image" | "secretArgs">, v: Verdict): string {
    let why = v.error ?? "refused";
    if (s.secretArgs && v.value !== undefined) why = why.split(v.value).join("(secret value)");
    const accepted = v.accepted && v.accepted.length > 0 ? `; it accepts: ${v.accepted.join(", ")}` : "";
    const version = v.vllm ? `vLLM ${v.vllm}` : "its vLLM";
    return `serve would not start on node ${s.node}: ${why}${accepted} (checked by ${version} in image ${s.image.slice(0, 19)}); the running server was not touched`;
}

async function runCheck(s: State): Promise<{ verdict?: Verdict; problem?: string }> {
    const r = await runBash(s.checkScript, {}, JSON.stringify(s.command));
    if (r.code !== 0) {
        return { problem: `${s.what}: could not be checked (exit ${r.code}):\n${tail(r.stderr, 15)}` };
    }
    try {
        return { verdict: JSON.parse(r.stdout.trim().split("\n").pop() ?? "") as Verdict };
    } catch {
        return { problem: `${s.what}: the check printed no verdict (stdout: ${JSON.stringify(r.stdout.slice(0, 200))})` };
    }
}

/**
 * A serve container's command, checked by the image's own vLLM on its host before the container is made or
 * replaced. The check runs in the provider's `check`, which the engine calls when the resource is registered, in
 * `pulumi preview` too, and which fails the operation naming the flag: the serve container depends on this
 * resource, so a refused change never reaches it and the running server keeps serving. It runs only when the
 * command or the image changed (a plain `up` checks nothing), and not in a preview that does not know the image yet
 * (a new image still to be copied: `up` checks it once it is on the host).
 */
export const serveArgsCheckProvider: pulumi.dynamic.ResourceProvider = {
    async check(olds: State | undefined, news: State) {
        if (!known(news)) return { inputs: news };
        const same = olds !== undefined && olds.image === news.image && JSON.stringify(olds.command) === JSON.stringify(news.command);
        if (same && olds.vllm !== undefined) return { inputs: { ...news, vllm: olds.vllm } };
        const r = await runCheck(news);
        if (r.problem !== undefined) return { inputs: news, failures: [{ property: "checkScript", reason: r.problem }] };
        const v = r.verdict!;
        // named on `node`, not `command`: the engine prints the property's value beside the reason, and the command
        // may carry values from secret config
        if (!v.ok) return { inputs: news, failures: [{ property: "node", reason: refusalText(news, v) }] };
        return { inputs: { ...news, vllm: v.vllm ?? "unknown" } };
    },

    async diff(_id: string, olds: State, news: State) {
        const changed = ["image", "command", "checkScript", "secretArgs", "what", "node"].filter(
            (k) => JSON.stringify(olds[k as keyof State]) !== JSON.stringify(news[k as keyof State]),
        );
        return changed.length > 0 ? { changes: true, replaces: [], stables: [] } : { changes: false };
    },

    async create(inputs: State) {
        return { id: `${inputs.node}-serve-args`, outs: inputs };
    },

    async update(_id: string, _olds: State, news: State) {
        return { outs: news };
    },

    async delete() {
        // Nothing on the host: the check's container removed itself.
    },
};

/** The check of one serve container's command; `vllm` is the image's vLLM version that accepted it. */
export class ServeArgsCheck extends pulumi.dynamic.Resource {
    declare public readonly vllm: pulumi.Output<string>;

    constructor(name: string, args: ServeArgsCheckInputs, opts?: pulumi.CustomResourceOptions) {
        super(serveArgsCheckProvider, name, { ...args, vllm: undefined }, opts);
    }
}

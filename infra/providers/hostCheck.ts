import * as pulumi from "@pulumi/pulumi";
import { lastLine, runBash, tail } from "./bash";

/**
 * Inputs of a HostCheck: a bounded wait and a quick look at the same condition on a host (both local bash command
 * lines, built by the pure builders, that reach the host over ssh), and the values whose change re-runs the wait.
 */
export interface HostCheckInputs {
    /** What is checked, for messages: "serve readiness on node spark-1". */
    what: pulumi.Input<string>;
    /** Waits, bounded, until the condition holds; exit 0 with the result as its last stdout line. */
    waitScript: pulumi.Input<string>;
    /**
     * One quick look: exit 0 when the condition holds (last stdout line: the current result), 255 when ssh could not
     * reach the host, anything else when it does not hold.
     */
    checkScript: pulumi.Input<string>;
    /** Values whose change re-runs the wait (container IDs, a key hash). */
    triggers: pulumi.Input<pulumi.Input<string>[]>;
}

interface State {
    what: string;
    waitScript: string;
    checkScript: string;
    triggers: string[];
    /** Last stdout line of the last successful wait or look. */
    result?: string;
    /** false when the last refresh found the condition broken: the next up waits again. */
    healthy?: boolean;
    /** The look's complaint when unhealthy (stderr tail). */
    problem?: string;
    /** Last stdout line of the last successful wait (a look at refresh leaves it): what that wait found. */
    waitResult?: string;
    /** Seconds the last successful wait took. */
    waitedSeconds?: number;
}

const INPUTS = ["what", "waitScript", "checkScript", "triggers"] as const;

async function wait(s: State): Promise<State> {
    const t0 = Date.now();
    const r = await runBash(s.waitScript);
    if (r.code !== 0) {
        throw new Error(`${s.what} failed (exit ${r.code}):\n${tail(r.stderr, 25)}`);
    }
    const result = lastLine(r.stdout);
    return { ...s, result, healthy: true, problem: "", waitResult: result, waitedSeconds: Math.round((Date.now() - t0) / 100) / 10 };
}

/**
 * A condition on a host that `pulumi up` waits for and `pulumi refresh` looks at again. create and an update
 * (any input changed, e.g. a container ID in triggers) run the bounded wait. read (refresh) runs the quick look: a
 * broken condition is recorded as healthy=false, so the next `up` waits again, in dependency order after whatever
 * it replaces first; a changed result (a re-formed Ray cluster's fingerprint) flows to the resources that take it
 * as input. An unreachable host fails the refresh naming the check. Plain `up` without refresh runs nothing.
 */
export const hostCheckProvider: pulumi.dynamic.ResourceProvider = {
    async check(_olds: State, news: State) {
        return { inputs: news };
    },

    // A changed input (a replaced container's ID in triggers, a new script) is an update that waits again, never a
    // replacement: a check has nothing on the host to replace, and as a replacement it would be deleted ahead of a
    // container that is replaced delete-first (every named container is), so a failed wait would leave it pending
    // replacement, which refresh never reads. As an update that fails, the check keeps its recorded state, and the
    // next refresh looks and records what it finds (a used-up crash budget, an OOM kill) as its problem.
    async diff(_id: string, olds: State, news: State) {
        const changed = INPUTS.filter((k) => JSON.stringify(olds[k]) !== JSON.stringify(news[k]));
        if (changed.length > 0 || olds.healthy === false) {
            return { changes: true, replaces: [], stables: [] };
        }
        return { changes: false };
    },

    async create(inputs: State) {
        const outs = await wait(inputs);
        return { id: `${inputs.what}`.replace(/[^A-Za-z0-9.-]+/g, "-"), outs };
    },

    async update(_id: string, _olds: State, news: State) {
        return { outs: await wait(news) };
    },

    async read(id: string, props?: State) {
        if (!props) {
            throw new Error(`cannot refresh host check ${id} without its recorded state`);
        }
        const r = await runBash(props.checkScript);
        if (r.code === 255) {
            throw new Error(`${props.what}: cannot reach the host:\n${tail(r.stderr, 25)}`);
        }
        if (r.code === 0) {
            return { id, props: { ...props, result: lastLine(r.stdout) || props.result, healthy: true, problem: "" } };
        }
        return { id, props: { ...props, healthy: false, problem: tail(r.stderr, 10) } };
    },

    async delete() {
        // Nothing to undo: a check leaves nothing behind on the host.
    },
};

/**
 * A checked condition on a host; `result` is the last line its wait (or look) printed, `waitResult` the last line of
 * its last wait (undefined in a state recorded before the field existed, until the next wait).
 */
export class HostCheck extends pulumi.dynamic.Resource {
    declare public readonly result: pulumi.Output<string>;
    declare public readonly healthy: pulumi.Output<boolean>;
    declare public readonly waitResult: pulumi.Output<string | undefined>;
    declare public readonly waitedSeconds: pulumi.Output<number | undefined>;

    constructor(name: string, args: HostCheckInputs, opts?: pulumi.CustomResourceOptions) {
        super(
            hostCheckProvider,
            name,
            { ...args, result: undefined, healthy: undefined, problem: undefined, waitResult: undefined, waitedSeconds: undefined },
            opts,
        );
    }
}

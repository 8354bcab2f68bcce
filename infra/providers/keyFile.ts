import * as pulumi from "@pulumi/pulumi";
import { lastLine, runBash, tail } from "./bash";

/** Inputs of a KeyFile: the scripts (local bash command lines reaching the host over ssh) and the key. */
export interface KeyFileInputs {
    /** For messages: "api key file on node spark-1". */
    what: pulumi.Input<string>;
    /** Installs the key read from stdin; prints the file path. */
    installScript: pulumi.Input<string>;
    /** Prints the hash of the file's content (apiKeyHash), or "missing"; exit 255 when ssh cannot reach the host. */
    checkScript: pulumi.Input<string>;
    removeScript: pulumi.Input<string>;
    /** The key (secret). */
    key: pulumi.Input<string>;
    /** apiKeyHash(key): what checkScript must print. */
    keyHash: pulumi.Input<string>;
}

interface State {
    what: string;
    installScript: string;
    checkScript: string;
    removeScript: string;
    key: string;
    keyHash: string;
    /** The installed file's path on the host. */
    path?: string;
    /** false when the last refresh found the file missing or holding another key: the next up installs it again. */
    intact?: boolean;
}

async function install(s: State): Promise<State> {
    const r = await runBash(s.installScript, {}, s.key);
    if (r.code !== 0) {
        throw new Error(`${s.what}: install failed (exit ${r.code}):\n${tail(r.stderr, 10)}`);
    }
    return { ...s, path: lastLine(r.stdout), intact: true };
}

/**
 * The API key as a file on a host, which `pulumi refresh` verifies: read runs the check script, and a file that is
 * missing, empty, a directory or holding another key is recorded as intact=false, so the next `up` installs it
 * again (before whatever depends on it is replaced). A changed key is an update: the file is rewritten in place
 * (the server, which reads the key at start, is replaced by its key-hash label). Destroy removes the file.
 */
export const keyFileProvider: pulumi.dynamic.ResourceProvider = {
    async check(_olds: State, news: State) {
        return { inputs: news };
    },

    async diff(_id: string, olds: State, news: State) {
        const changed = (["installScript", "checkScript", "removeScript", "key", "keyHash"] as const).filter((k) => olds[k] !== news[k]);
        return changed.length > 0 || olds.intact === false ? { changes: true, replaces: [], stables: [] } : { changes: false };
    },

    async create(inputs: State) {
        const outs = await install(inputs);
        return { id: `${inputs.what}`.replace(/[^A-Za-z0-9.-]+/g, "-"), outs };
    },

    async update(_id: string, _olds: State, news: State) {
        return { outs: await install(news) };
    },

    async read(id: string, props?: State) {
        if (!props) {
            throw new Error(`cannot refresh ${id} without its recorded state`);
        }
        const r = await runBash(props.checkScript);
        if (r.code !== 0) {
            throw new Error(`${props.what}: check failed (exit ${r.code}):\n${tail(r.stderr, 10)}`);
        }
        return { id, props: { ...props, intact: lastLine(r.stdout) === props.keyHash } };
    },

    async delete(_id: string, props: State) {
        const r = await runBash(props.removeScript);
        if (r.code !== 0) {
            throw new Error(`${props.what}: removal failed (exit ${r.code}):\n${tail(r.stderr, 10)}`);
        }
    },
};

/** The API key file on a host; `path` is where it was installed. The key stays a secret in the state. */
export class KeyFile extends pulumi.dynamic.Resource {
    declare public readonly path: pulumi.Output<string>;
    declare public readonly intact: pulumi.Output<boolean>;
    /** The installed key's hash, known once the file is in place: containers that read the file take it as data. */
    declare public readonly keyHash: pulumi.Output<string>;

    constructor(name: string, args: KeyFileInputs, opts?: pulumi.CustomResourceOptions) {
        super(
            keyFileProvider,
            name,
            { ...args, key: pulumi.secret(args.key), path: undefined, intact: undefined },
            {
                ...opts,
                additionalSecretOutputs: ["key"],
            },
        );
    }
}

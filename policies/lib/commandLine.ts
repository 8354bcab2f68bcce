import { ContainerView, Maybe, UNKNOWN, Unknown } from "./container";
import { mayBeFlag } from "../../infra/vllmFlags";

/**
 * The words a container runs: entrypoint then command. Elements are also split on whitespace, so a flag
 * inside a `sh -c "..."` script is found as well as one passed as its own array element.
 */
export function argv(c: ContainerView): Maybe<(string | Unknown)[]> {
    if (c.entrypoints === UNKNOWN || c.command === UNKNOWN) return UNKNOWN;
    const elems = [...(c.entrypoints ?? []), ...(c.command ?? [])];
    if (c.entrypoints === undefined && c.command === undefined) return undefined;
    const words: (string | Unknown)[] = [];
    for (const e of elems) {
        if (e === UNKNOWN) {
            words.push(UNKNOWN);
            continue;
        }
        for (const w of e.split(/\s+/)) {
            if (w !== "") words.push(w.replace(/^["']+|["']+$/g, ""));
        }
    }
    return words;
}

export type FlagLookup = { kind: "absent" } | { kind: "unknown" } | { kind: "no-value" } | { kind: "value"; value: string };

/** vLLM accepts `--gpu_memory_utilization` for `--gpu-memory-utilization`; compare in the dashed form. */
function normalizeFlag(word: string): string {
    return word.startsWith("--") ? word.replace(/_/g, "-") : word;
}

/**
 * Finds a flag's value in `--flag value` or `--flag=value` form; the last occurrence wins, as with argparse
 * and click. `names` lists the spellings (e.g. `--tensor-parallel-size` and `-tp`). An absent flag next to a
 * word that is not known yet is reported as unknown: that word might have been the flag.
 */
export function findFlag(words: Maybe<(string | Unknown)[]>, ...names: string[]): FlagLookup {
    return lookup(words, names, (w, name) => normalizeFlag(w) === name);
}

/**
 * findFlag as vLLM's parser reads its own flags: besides `_` for `-`, any unambiguous prefix sets the flag
 * (`--tensor-parallel 1` is --tensor-parallel-size), so an abbreviation later on the line wins like the full name.
 * Ray's CLI (click) takes no abbreviations: findFlag is for its flags.
 */
export function findVllmFlag(words: Maybe<(string | Unknown)[]>, ...names: string[]): FlagLookup {
    return lookup(words, names, (w, name) => mayBeFlag(w.split("=", 1)[0], name));
}

function lookup(words: Maybe<(string | Unknown)[]>, names: string[], sets: (word: string, name: string) => boolean): FlagLookup {
    if (words === UNKNOWN) return { kind: "unknown" };
    if (words === undefined) return { kind: "absent" };
    let found: FlagLookup = { kind: "absent" };
    let sawUnknown = false;
    for (let i = 0; i < words.length; i++) {
        const w = words[i];
        if (w === UNKNOWN) {
            sawUnknown = true;
            continue;
        }
        for (const name of names) {
            if (!sets(w.split("=", 1)[0], name)) continue;
            if (w.includes("=")) {
                found = { kind: "value", value: w.slice(w.indexOf("=") + 1) };
            } else {
                const next = words[i + 1];
                if (next === UNKNOWN) found = { kind: "unknown" };
                else if (next === undefined || (next.startsWith("-") && !/^-\d/.test(next))) found = { kind: "no-value" };
                else found = { kind: "value", value: next };
            }
        }
    }
    if (found.kind === "absent" && sawUnknown) return { kind: "unknown" };
    return found;
}

/**
 * How vLLM's command line reads a flag, for config validation and the policy pack alike (no dependencies, like the
 * contract): its parser turns `_` into `-` in long options and, being argparse, takes any unambiguous prefix of a
 * long option (`--tensor-parallel 1` sets --tensor-parallel-size) and of a multi-letter short one (`-t 1` sets -tp).
 */

/** `--max_model_len=1` → `--max-model-len`; not a flag → undefined. */
export function canonicalFlag(word: string): string | undefined {
    if (!word.startsWith("-") || /^-\d/.test(word)) {
        return undefined;
    }
    const flag = word.split("=", 1)[0];
    return flag.startsWith("--") ? `--${flag.slice(2).replace(/_/g, "-")}` : flag;
}

/** True when vLLM could read `word` as `flag` (its own spelling, `_` for `-`, or a prefix of it, `=value` or not). */
export function mayBeFlag(word: string, flag: string): boolean {
    const f = canonicalFlag(word);
    if (f === undefined || f === "-" || f === "--") {
        return false;
    }
    return f === flag || (flag.startsWith(f) && f.length > (f.startsWith("--") ? 2 : 1));
}

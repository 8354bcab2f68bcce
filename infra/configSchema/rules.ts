/**
 * Support for rules that span fields (duplicates across nodes, TP x PP against the GPUs, port clashes). zod skips
 * refinements once a field has failed; these run anyway, so every problem is listed in one round, but they judge
 * only the fields that passed their own rules: a malformed port is reported once, not again as a clash.
 */
import { z } from "zod";
import { isObject } from "./fields";

/** Refinement params: run even when a field of the value already failed. */
export const evenIfInvalid = { when: () => true };

/** The value as its schema parses it, or undefined when it fails. Parsing a parsed value again is a no-op. */
export function valid<T extends z.core.$ZodType>(schema: T, value: unknown): z.output<T> | undefined {
    const r = z.safeParse(schema, value);
    return r.success ? r.data : undefined;
}

export type ValidFields<S extends z.ZodRawShape> = { [K in keyof S]?: z.output<S[K]> };

/**
 * The fields of a partly parsed section that pass on their own; a missing one takes its default. A section that
 * is not an object reads as empty (its own problem is already reported).
 */
export function validFields<S extends z.ZodRawShape>(shape: S, value: unknown): ValidFields<S> {
    const obj = isObject(value) ? value : {};
    const out: ValidFields<S> = {};
    for (const key of Object.keys(shape) as (keyof S & string)[]) {
        out[key] = valid(shape[key], obj[key]);
    }
    return out;
}

export function problem(ctx: z.RefinementCtx, path: PropertyKey[], message: string): void {
    ctx.addIssue({ code: "custom", path, message });
}

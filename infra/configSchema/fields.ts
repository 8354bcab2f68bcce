/**
 * Field constructors shared by every config section. Each one carries its own messages, so a problem reads
 * `<key path>: <rule>` wherever the field is used, and none echoes a value that might be a secret unless the
 * message says so on purpose (a malformed address is worth showing; an extra argument is not).
 *
 * Presence: a missing key and a null value are the same (`section` drops nulls); an empty string also counts as
 * unset for string fields only, so `port: ""` is still reported rather than silently defaulted.
 *
 * Each constructor also states its rule in the schema's metadata (`rule`, and `type` where the value's kind is not
 * the zod type's), next to the check that enforces it, for the generated reference (docs/configuration.md). A field's
 * own meaning is its `description`; `across` states a rule that spans keys (checked in cluster.ts and the sections).
 */
import * as path from "path";
import { z } from "zod";
import { SYSTEM_TREES, forbiddenHostDir } from "../hostPaths";

export const REQUIRED = "is required";

export const quote = (v: unknown): string => JSON.stringify(v);

/** A free-form text value as YAML may spell it: numbers and booleans are taken as their text. */
export const scalarText = (v: unknown): unknown => (typeof v === "number" || typeof v === "boolean" ? String(v) : v);

export function isObject(v: unknown): v is Record<string, unknown> {
    return typeof v === "object" && v !== null && !Array.isArray(v);
}

const IPV4_RE = /^(25[0-5]|2[0-4]\d|1\d\d|[1-9]?\d)(\.(25[0-5]|2[0-4]\d|1\d\d|[1-9]?\d)){3}$/;
const DNS_LABEL = "[A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?";
const DNS_NAME_RE = new RegExp(`^${DNS_LABEL}(\\.${DNS_LABEL})*\\.?$`);
/** Paths end up inside single-quoted shell words and docker flags; these characters would break them. */
const UNSAFE_PATH_RE = /[\s'"\\]/;

export function isIPv4(s: string): boolean {
    return IPV4_RE.test(s);
}

/** An SSH host is an IPv4 address or a DNS name; anything else (user@, port, spaces, leading '-') is malformed. */
export function isValidSshHost(s: string): boolean {
    if (/^\d+(\.\d+)*$/.test(s)) {
        return isIPv4(s);
    }
    return DNS_NAME_RE.test(s) && s.length <= 253;
}

// ---- strings: build the check, then say how the key may be left out (required / optional / withDefault) ----

export const string = () => z.string({ error: (iss) => (iss.input === undefined ? REQUIRED : "must be a string") });

export const pattern = (re: RegExp, what: string) =>
    string()
        .regex(re, { error: (iss) => `${quote(iss.input)} is not a valid ${what}` })
        .meta({ rule: `${what}: \`${re.source}\`` });

const TOKEN_RE = /^[A-Za-z0-9][A-Za-z0-9._\-/:]*$/;

/** A name handed to vLLM as one argument (parser, load format, served model name). */
export const token = (what: string) => pattern(TOKEN_RE, what);

export const ipv4 = () =>
    string()
        .refine(isIPv4, { error: (iss) => `${quote(iss.input)} is not a valid IPv4 address` })
        .meta({ rule: "an IPv4 address" });

export const absPath = () =>
    string()
        .refine((v) => path.posix.isAbsolute(v) && !UNSAFE_PATH_RE.test(v), {
            error: (iss) => `${quote(iss.input)} must be an absolute path without spaces or quotes`,
        })
        .meta({ rule: "an absolute path without spaces or quotes" });

/** An absolute path that may hold what the program puts on a host (see forbiddenHostDir). */
export const hostDir = () =>
    absPath()
        .superRefine((v, ctx) => {
            const why = forbiddenHostDir(v);
            if (why !== undefined) ctx.addIssue({ code: "custom", message: `${quote(v)} ${why}; choose a directory of its own` });
        })
        .meta({
            rule:
                "an absolute path without spaces or quotes; not /, nor inside or a parent of " +
                `${SYSTEM_TREES.join(", ")}, /var/lib/docker or /var/lib/containerd; not a home directory; not inside /tmp or /var/tmp`,
        });

/** May be relative to the operator's home (~/.ssh/...); only what would break quoting is rejected. */
export const quotablePath = () =>
    string()
        .refine((v) => !UNSAFE_PATH_RE.test(v), { error: "must be a path without spaces or quotes" })
        .meta({ rule: "a path without spaces or quotes (`~/` is the operator's home)" });

export const oneOf = <const T extends readonly [string, ...string[]]>(values: T) =>
    z.enum(values, {
        error: (iss) =>
            iss.input === undefined
                ? REQUIRED
                : typeof iss.input !== "string"
                  ? "must be a string"
                  : `${quote(iss.input)} must be one of ${values.join(", ")}`,
    });

const blankIsUnset = (v: unknown) => (v === "" ? undefined : v);

export const required = <T extends z.ZodType>(s: T) => z.preprocess(blankIsUnset, s);
export const optional = <T extends z.ZodType>(s: T) => z.preprocess(blankIsUnset, s.optional());
export const withDefault = <T extends z.ZodType>(s: T, def: z.util.NoUndefined<z.output<T>>) => z.preprocess(blankIsUnset, s.default(def));

// ---- numbers and flags: `pulumi config set` stores strings, so the obvious string spellings are accepted ----

/** An integer in min..max (required unless chained with .optional() or .default()). */
export function int(opts: { min: number; max?: number; what?: string }) {
    const range = opts.max !== undefined ? `${opts.min}..${opts.max}` : `>= ${opts.min}`;
    const outOfRange = (iss: { input?: unknown }) => `${iss.input} is out of range ${range}${opts.what ? ` (${opts.what})` : ""}`;
    const notInteger = (iss: { input?: unknown }) => (iss.input === undefined ? REQUIRED : `${quote(iss.input)} must be an integer`);
    return z
        .preprocess(
            (v) => (typeof v === "string" && /^-?\d+$/.test(v) ? Number(v) : v),
            z
                .number({ error: notInteger })
                .refine(Number.isInteger, { error: notInteger, abort: true })
                .min(opts.min, { error: outOfRange })
                .max(opts.max ?? Number.MAX_SAFE_INTEGER, { error: outOfRange }),
        )
        .meta({ type: "integer", rule: `${range}${opts.what ? ` (${opts.what})` : ""}` });
}

export const positiveInt = () => int({ min: 1 });

/** A time bound in seconds: at most a week, so a typo cannot make a wait that never ends. */
export const seconds = () => int({ min: 1, max: 7 * 24 * 3600, what: "seconds, at most a week" });

export const port = (def: number) => int({ min: 1, max: 65535, what: "TCP port" }).default(def);

export const bool = (def: boolean) =>
    z
        .preprocess(
            (v) => (v === "true" ? true : v === "false" ? false : v),
            z.boolean({ error: (iss) => `${quote(iss.input)} must be true or false` }),
        )
        .default(def);

const SIZE_UNITS: Record<string, number> = { "": 1, b: 1, k: 1024, m: 1024 ** 2, g: 1024 ** 3, t: 1024 ** 4 };

/**
 * A memory size in docker's syntax (512m, 64g; a plain number is bytes, "0" is none), read as bytes and at least
 * `min` bytes unless 0. The message shows the value as written.
 */
export const size = (min: number) =>
    z
        .preprocess(
            (v) => (typeof v === "number" ? String(v) : v),
            z.string({ error: (iss) => (iss.input === undefined ? REQUIRED : "must be a size such as 512m or 64g") }),
        )
        .transform((v, ctx) => {
            const m = /^(\d+)([bkmgt]?)$/i.exec(v);
            const bytes = m ? Number(m[1]) * SIZE_UNITS[m[2].toLowerCase()] : NaN;
            if (!Number.isSafeInteger(bytes) || (bytes !== 0 && bytes < min)) {
                ctx.addIssue({
                    code: "custom",
                    message: m
                        ? `${quote(v)} is below the smallest allowed, ${min / 1024 ** 2}m`
                        : `${quote(v)} is not a size such as 512m or 64g`,
                });
                return z.NEVER;
            }
            return bytes;
        })
        .meta({
            type: "size",
            rule: `docker's syntax (512m, 64g; a plain number is bytes); 0 is none${min > 0 ? `, else at least ${min / 1024 ** 2}m` : ""}`,
        });

/** Decimal only: Number() also reads "0x1" (1), "1e0" and " 1 ", which no one means for a memory share. */
const asNumber = (v: unknown) => (typeof v === "string" ? (/^(\d+(\.\d*)?|\.\d+)$/.test(v) ? Number(v) : NaN) : v);

/** A share in (0, 1]; the message shows the value as written (a string stays quoted). */
export const fraction = (def: number) =>
    z
        .custom<number | string>(
            (v) => {
                const u = asNumber(v);
                return typeof u === "number" && u > 0 && u <= 1;
            },
            { error: (iss) => `${quote(iss.input)} must be in (0, 1]` },
        )
        .transform(Number)
        .meta({ type: "number", rule: "in (0, 1]" })
        .default(def);

// ---- lists and objects ----

const NON_EMPTY = "must be a non-empty string";

/** A list item: a non-empty string, optionally matching `re`. */
export function item(re?: RegExp, what?: string) {
    const s = z
        .string({ error: NON_EMPTY })
        .refine((v) => v !== "", { error: NON_EMPTY, abort: true })
        .meta({ rule: "a non-empty string" });
    return re
        ? s
              .regex(re, { error: (iss) => `${quote(iss.input)} is not a valid ${what ?? "value"}` })
              .meta({ rule: `${what ?? "value"}: \`${re.source}\`` })
        : s;
}

/** A list of strings; a missing one is empty. */
export const list = <T extends z.ZodType<string>>(of: T) => z.array(of, { error: "must be a list of strings" }).default(() => []);

/** A null value for a known key means unset, as if the key were missing (an unknown key is reported either way). */
const dropNulls = (shape: z.ZodRawShape) => (v: unknown) =>
    isObject(v)
        ? Object.fromEntries(Object.entries(v).filter(([k, x]) => x !== null || !Object.prototype.hasOwnProperty.call(shape, k)))
        : v;

/** A config object. Unknown keys are rejected: a typo would otherwise silently fall back to a default. */
export const section = <S extends z.ZodRawShape>(shape: S) =>
    z.preprocess(
        dropNulls(shape),
        z.strictObject(shape, {
            error: (iss) => (iss.code === "invalid_type" ? (iss.input === undefined ? REQUIRED : "must be an object") : undefined),
        }),
    );

/**
 * A section the stack must set. When it is missing or not an object, its required keys are listed too, so one
 * round of edits adds them all.
 */
export function requiredSection<T extends z.ZodType>(schema: T) {
    return z.preprocess((v, ctx) => {
        if (!isObject(v)) {
            ctx.addIssue({ code: "custom", message: v === undefined ? REQUIRED : "must be an object" });
            for (const { path, message } of schema.safeParse({}).error?.issues ?? []) {
                ctx.addIssue({ code: "custom", path, message });
            }
        }
        return v;
    }, schema);
}

/** A section with a default for every key: missing means all defaults. */
export const optionalSection = <T extends z.ZodType>(schema: T) => schema.prefault({} as z.input<T>);

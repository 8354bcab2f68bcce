import { ResourceValidationPolicy } from "@pulumi/policy";
import { argv } from "./lib/commandLine";
import { mayBeFlag } from "../infra/vllmFlags";
import { ContainerView, LABEL, Maybe, UNKNOWN, describe, label, serveContainer } from "./lib/container";

/**
 * --api-key however vLLM would read it: `--api_key`, an abbreviation (`--api-ke`), with `=value` or not, as its
 * own element or a word of a shell script string.
 */
const passesApiKey = (word: string) => mayBeFlag(word, "--api-key");
/**
 * `VLLM_API_KEY=<literal>` inside a script puts the key in the shell's argv. Reading it at run time
 * (`VLLM_API_KEY="$(cat /run/...)"`) is the intended form and is allowed: the value starts with `$`.
 */
const LITERAL_KEY_ASSIGNMENT = /(^|[\s;&|"'])VLLM_API_KEY=(?!["']?\$)/;

type Found = "yes" | "no" | "unknown";

/**
 * Whether the serve container is a headless rank of the native backend (`vllm serve ... --headless`): it runs the
 * engine only and opens no API port, so it needs no key (and is better off without a copy of it).
 */
function headless(c: ContainerView): Found {
    const words = argv(c);
    if (words === UNKNOWN) return "unknown";
    if (words === undefined) return "no";
    if (words.includes("--headless")) return "yes";
    return words.includes(UNKNOWN) ? "unknown" : "no";
}
interface Target {
    target: Maybe<string>;
    readOnly: Maybe<boolean>;
}

/** Whether a read-only mount or volume provides `path` (or a directory containing it) in the container. */
function readOnlyMountAt(c: ContainerView, path: string): Found | "read-write" {
    const covers = (target: string) => {
        const t = target.replace(/\/+$/, "");
        return path === t || path.startsWith(`${t}/`);
    };
    const candidates: Target[] = [
        ...(Array.isArray(c.mounts) ? c.mounts.map((m): Target => ({ target: m.target, readOnly: m.readOnly })) : []),
        ...(Array.isArray(c.volumes) ? c.volumes.map((v): Target => ({ target: v.containerPath, readOnly: v.readOnly })) : []),
    ];
    let sawUnknown = c.mounts === UNKNOWN || c.volumes === UNKNOWN;
    let readWrite = false;
    for (const { target, readOnly } of candidates) {
        if (target === UNKNOWN) {
            sawUnknown = true;
        } else if (target !== undefined && covers(target)) {
            if (readOnly === true) return "yes";
            if (readOnly === UNKNOWN) sawUnknown = true;
            else readWrite = true;
        }
    }
    if (sawUnknown) return "unknown";
    return readWrite ? "read-write" : "no";
}

export const serveRequiresApiKey: ResourceValidationPolicy = {
    name: "serve-requires-api-key",
    description:
        "The vLLM serve container requires an API key read from a file mounted read-only (label " +
        "vllm-cluster.api-key-file names its path) and never passes the key as --api-key or a VLLM_API_KEY " +
        "environment variable, both of which anyone can read with ps or docker inspect. Headless ranks of the " +
        "native backend (--headless) serve no API and need no key file; the leak checks still apply to them.",
    enforcementLevel: "mandatory",
    severity: "critical",
    validateResource: (args, reportViolation) => {
        const c = serveContainer(args);
        if (c === undefined) return;
        const who = describe(c);

        const keyFile = label(c, LABEL.apiKeyFile);
        const noApi = headless(c);
        if (noApi !== "no" && (keyFile === undefined || keyFile === "")) {
            // a headless rank serves no API (or, not known yet, may not): nothing to require; leaks are still checked
        } else if (keyFile === undefined || keyFile === "") {
            reportViolation(
                `${who}: no label ${LABEL.apiKeyFile}, so nothing shows the endpoint requires an API key. ` +
                    "Bind-mount the key file read-only and name its container path in that label.",
            );
        } else if (keyFile !== UNKNOWN) {
            const mount = readOnlyMountAt(c, keyFile);
            if (mount === "no") {
                reportViolation(
                    `${who}: the API key file ${keyFile} is not mounted into the container. ` +
                        `Add a read-only bind mount with target ${keyFile}.`,
                );
            } else if (mount === "read-write") {
                reportViolation(
                    `${who}: the API key file ${keyFile} is mounted read-write. Mark that mount readOnly: true ` +
                        "so the serve process cannot alter its own credential.",
                );
            }
        }

        for (const list of [c.entrypoints, c.command]) {
            if (!Array.isArray(list)) continue;
            for (const word of list) {
                if (word === UNKNOWN) continue;
                if (word.split(/\s+/).some((w) => passesApiKey(w.replace(/^["']+|["']+$/g, "")))) {
                    reportViolation(
                        `${who}: the command line passes --api-key, which shows the key in ps and docker inspect. ` +
                            `Remove it; the key belongs in the read-only key file (${typeof keyFile === "string" ? keyFile : "the key file"}).`,
                    );
                } else if (LITERAL_KEY_ASSIGNMENT.test(word)) {
                    reportViolation(
                        `${who}: the entrypoint/command assigns VLLM_API_KEY a literal value, which shows the key in ps and ` +
                            `docker inspect. Load it at run time instead: VLLM_API_KEY="$(cat <key file>)".`,
                    );
                }
            }
        }
        if (Array.isArray(c.envs)) {
            for (const env of c.envs) {
                if (env !== UNKNOWN && /^VLLM_API_KEY=/.test(env)) {
                    reportViolation(
                        `${who}: envs sets VLLM_API_KEY, which docker inspect shows to anyone with access to the Docker ` +
                            "engine. Remove it from envs and load the key from the read-only key file in the entrypoint.",
                    );
                }
            }
        }
    },
};

#!/usr/bin/env node
// @ts-check
"use strict";
/**
 * Which stacks does a change affect?
 *
 * A pull request or a merge changes a set of files; a GitOps pipeline must preview (on the pull request) and
 * deploy (on merge) exactly the stacks whose desired state may differ because of it:
 *  - stacks/Pulumi.<stack>.yaml changed      -> that stack
 *  - the program changed (infra/, components/, Pulumi.yaml, package.json, package-lock.json, tsconfig.json)
 *                                            -> every stack
 *  - the policy pack changed (policies/)     -> every stack (its preview must pass the new rules)
 *  - anything else (docs, tests, workflows)  -> no stack
 * Stacks whose file was deleted are reported apart: a pipeline must never destroy a cluster on its own.
 * Stacks named in `exclude` (default: the simulated `local` and `local-native` stacks) are never deployed by the pipeline.
 */

const PROGRAM_PATHS = [/^infra\//, /^components\//, /^policies\//, /^Pulumi\.yaml$/, /^package(-lock)?\.json$/, /^tsconfig\.json$/];
const STACK_FILE = /^stacks\/Pulumi\.([A-Za-z0-9_.-]+)\.ya?ml$/;

/**
 * @param {{ changed: string[], stacks: string[], exclude?: string[] }} input
 *   changed: repository-relative paths changed by the change (added, modified, deleted or renamed)
 *   stacks:  stacks that exist after the change (from stacks/Pulumi.*.yaml)
 *   exclude: stacks the pipeline must not touch
 * @returns {{ stacks: string[], removed: string[], reasons: Record<string, string> }}
 */
function affectedStacks({ changed, stacks, exclude = ["local", "local-native"] }) {
    for (const s of stacks) {
        if (!/^[A-Za-z0-9_.-]+$/.test(s)) {
            throw new Error(`stack name ${JSON.stringify(s)} is not a valid stack name`);
        }
    }
    const existing = new Set(stacks);
    const skip = new Set(exclude);
    /** @type {Record<string, string>} */
    const reasons = {};
    const removed = new Set();
    const programFile = changed.find((f) => PROGRAM_PATHS.some((re) => re.test(f)));
    if (programFile !== undefined) {
        for (const s of stacks) reasons[s] = `program changed (${programFile})`;
    }
    for (const f of changed) {
        const m = STACK_FILE.exec(f);
        if (!m) continue;
        const s = m[1];
        if (existing.has(s)) {
            reasons[s] = reasons[s] ?? `stack file changed (${f})`;
        } else {
            removed.add(s);
        }
    }
    for (const s of skip) delete reasons[s];
    return {
        stacks: Object.keys(reasons).sort(),
        removed: [...removed].filter((s) => !skip.has(s)).sort(),
        reasons,
    };
}

/** @param {string} dir */
function listStacks(dir) {
    const fs = require("fs");
    return fs
        .readdirSync(dir)
        .map((f) => /^Pulumi\.([A-Za-z0-9_.-]+)\.ya?ml$/.exec(f))
        .filter((m) => m !== null)
        .map((m) => /** @type {RegExpExecArray} */ (m)[1])
        .sort();
}

function main() {
    const { execFileSync } = require("child_process");
    const path = require("path");
    const args = process.argv.slice(2);
    const base = args[0];
    const head = args[1] ?? "HEAD";
    if (!base) {
        process.stderr.write("usage: affected-stacks.js <base-ref> [head-ref]   (prints JSON)\n");
        process.exit(2);
    }
    const root = execFileSync("git", ["rev-parse", "--show-toplevel"], { encoding: "utf8" }).trim();
    const changed = execFileSync("git", ["diff", "--name-only", "--no-renames", `${base}...${head}`], {
        cwd: root,
        encoding: "utf8",
    })
        .split("\n")
        .filter((l) => l.length > 0);
    const exclude = (process.env.GITOPS_EXCLUDE_STACKS ?? "local,local-native").split(",").filter((s) => s.length > 0);
    const result = affectedStacks({ changed, stacks: listStacks(path.join(root, "stacks")), exclude });
    process.stdout.write(JSON.stringify(result) + "\n");
}

module.exports = { affectedStacks, listStacks };

if (require.main === module) {
    main();
}

/**
 * `image.build` on the operator's side: the context and Dockerfile are checked before any host is touched, and
 * handed to the Docker provider relative to the program's working directory, so the state records the same paths
 * in every checkout (an absolute path would differ between a laptop and a CI runner and rebuild the image).
 */
import * as fs from "fs";
import * as path from "path";
import type { ImageConfig } from "./config";

/** The project directory (where Pulumi.yaml is): relative contexts are taken from here. */
export const PROJECT_DIR = path.join(__dirname, "..");

export interface ResolvedBuild {
    /** The context, relative to the program's working directory. */
    context: string;
    /** The Dockerfile, relative to the program's working directory (the provider's own convention). */
    dockerfile: string;
    args: Record<string, string>;
}

/** Whether `p`, links followed, is `top` or under it, links followed. */
function within(top: string, p: string): boolean {
    const rel = path.relative(fs.realpathSync(top), fs.realpathSync(p));
    return rel === "" || (!rel.startsWith("..") && !path.isAbsolute(rel));
}

/**
 * The context and Dockerfile, checked: each exists and stays inside the project directory (the context) or the context
 * (the Dockerfile) once links are followed, since the whole context is sent to the source node's engine. The schema
 * refuses absolute and `..` spellings already; this refuses a link that leads out.
 */
export function resolveBuild(build: NonNullable<ImageConfig["build"]>, cwd = process.cwd(), projectDir = PROJECT_DIR): ResolvedBuild {
    const context = path.resolve(projectDir, build.context);
    if (!fs.statSync(context, { throwIfNoEntry: false })?.isDirectory()) {
        throw new Error(`image.build.context: ${build.context} is not a directory (taken from ${projectDir})`);
    }
    if (!within(projectDir, context)) {
        throw new Error(
            `image.build.context: ${build.context} leads outside the project directory ${projectDir} (through a link to ` +
                `${fs.realpathSync(context)}): everything in a context is sent to the source node's engine`,
        );
    }
    const dockerfile = path.resolve(context, build.dockerfile);
    if (!fs.statSync(dockerfile, { throwIfNoEntry: false })?.isFile()) {
        throw new Error(`image.build.dockerfile: ${build.dockerfile} is not a file in the context ${build.context}`);
    }
    if (!within(context, dockerfile)) {
        throw new Error(`image.build.dockerfile: ${build.dockerfile} leads outside the context ${build.context} (through a link)`);
    }
    const rel = (p: string) => path.relative(cwd, p) || ".";
    return { context: rel(context), dockerfile: rel(dockerfile), args: build.args };
}

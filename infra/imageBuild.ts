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

export function resolveBuild(build: NonNullable<ImageConfig["build"]>, cwd = process.cwd(), projectDir = PROJECT_DIR): ResolvedBuild {
    const context = path.resolve(projectDir, build.context);
    if (!fs.statSync(context, { throwIfNoEntry: false })?.isDirectory()) {
        throw new Error(`image.build.context: ${build.context} is not a directory (taken from ${projectDir})`);
    }
    const dockerfile = path.resolve(context, build.dockerfile);
    if (!fs.statSync(dockerfile, { throwIfNoEntry: false })?.isFile()) {
        throw new Error(`image.build.dockerfile: ${build.dockerfile} is not a file in the context ${build.context}`);
    }
    const rel = (p: string) => path.relative(cwd, p) || ".";
    return { context: rel(context), dockerfile: rel(dockerfile), args: build.args };
}

/**
 * Pulumi programs in other languages that use a TypeScript component package (a folder with PulumiPlugin.yaml,
 * `runtime: nodejs`), prepared the way a user prepares one and run through the real CLI: `pulumi package add <the
 * component's folder>` (which generates the SDK for Python, or a record of the package for YAML, and in both cases
 * writes a `packages:` entry into Pulumi.yaml), then preview, up and destroy with engine.ts (the Automation API
 * over the CLI) on a throwaway file backend.
 *
 * The component package and each program are copied side by side into one temporary folder first, so nothing the
 * CLI writes (node_modules/, sdks/, venv/, Pulumi.yaml's packages) lands in the repository, and the programs share
 * one installed copy of the component. A package whose code lives beside its folder (the repository's own,
 * package/ importing components/ and infra/) is copied with those folders and the checkout's npm packages, as a
 * user's checkout has them. Offline: the component's npm packages come from npm's cache (or the checkout), and a
 * Python program's from a wheel folder filled once from PyPI and kept in the user cache. Needs `setup/toolchain.sh
 * --languages python,yaml` (the language hosts next to the CLI) and, for Python, python3 with its venv module.
 */
import { spawn } from "child_process";
import { createHash } from "crypto";
import * as fs from "fs";
import * as os from "os";
import * as path from "path";
import { engineEnv, openStack, Project } from "./engine";

// eslint-disable-next-line @typescript-eslint/no-require-imports
const yaml = require("js-yaml") as { load(s: string): unknown };

export type Language = "python" | "yaml";

/** The copy of a component package that programs add, in the temporary folder they share. */
export interface ComponentCopy {
    /** The temporary folder: removeWork deletes it with everything in it. */
    workDir: string;
    /** The component package's copy, its npm packages installed. */
    dir: string;
    /** The node_modules folder its code loads its npm packages from. */
    nodeModules: string;
    /** Seconds `npm install` took in it. */
    installSeconds: number;
}

/** Where a component package's code is, when not all of it is in the package's folder. */
export interface ComponentLayout {
    /** Folders beside the package's folder that its code imports (`../components`), copied along. */
    siblings?: string[];
    /**
     * The npm packages its code loads, linked beside the package's folder instead of installed into it (the
     * checkout's node_modules, for a package that declares no dependencies of its own).
     */
    nodeModules?: string;
    /**
     * The folder that holds the package's folder (under its own name) and its siblings in the copy, as a checkout
     * does; without it the package's folder is copied as `component`.
     */
    checkoutName?: string;
}

/** A program copy ready for preview/up/destroy (engine.ts), and what preparing it took. */
export interface LanguageProgram {
    language: Language;
    /** The engine.ts project: the program copy, its stack, its environment. */
    project: Project;
    /** Seconds per preparation step ("wheels", "package add"). */
    seconds: Record<string, number>;
    /** What `pulumi package add` printed. */
    packageAddOutput: string;
}

export interface ConfigValue {
    value: string;
    secret?: boolean;
}

export interface PrepareOptions {
    component: ComponentCopy;
    /** The program: a folder with Pulumi.yaml (runtime python or yaml) and its sources. */
    programDir: string;
    stackName: string;
    /** Stack config, set before anything runs (keys without the project's namespace). */
    config?: Record<string, ConfigValue>;
    /** Environment for every CLI run on the program besides the file backend's (PATH, for one). */
    env?: Record<string, string>;
}

export interface CommandResult {
    code: number | null;
    output: string;
    seconds: number;
}

/** Runs argv (no shell) in cwd with env, bounded; never throws for a non-zero exit. */
export function runCommand(argv: string[], cwd: string, env: NodeJS.ProcessEnv, timeoutMs: number): Promise<CommandResult> {
    return new Promise((resolve) => {
        const t0 = Date.now();
        const child = spawn(argv[0], argv.slice(1), { cwd, env, stdio: ["ignore", "pipe", "pipe"] });
        let output = "";
        const timer = setTimeout(() => {
            output += `\n(${argv.slice(0, 3).join(" ")}: no exit within ${Math.round(timeoutMs / 1000)} s: killed)\n`;
            child.kill("SIGKILL");
        }, timeoutMs);
        child.stdout.on("data", (d: Buffer) => (output += d.toString()));
        child.stderr.on("data", (d: Buffer) => (output += d.toString()));
        const end = (code: number | null) => {
            clearTimeout(timer);
            resolve({ code, output, seconds: (Date.now() - t0) / 1000 });
        };
        child.on("error", (e) => {
            output += `\ncannot run ${argv[0]}: ${e.message}\n`;
            end(null);
        });
        child.on("close", end);
    });
}

async function mustRun(what: string, argv: string[], cwd: string, env: NodeJS.ProcessEnv, timeoutMs: number): Promise<CommandResult> {
    const r = await runCommand(argv, cwd, env, timeoutMs);
    if (r.code !== 0) {
        throw new Error(`${what}: ${argv.join(" ")} (in ${cwd}) exited ${r.code}:\n${r.output.split("\n").slice(-30).join("\n")}`);
    }
    return r;
}

/** The program's language, from its Pulumi.yaml (`runtime: yaml` or `runtime: {name: python}`). */
export function programLanguage(programDir: string): Language {
    const file = path.join(programDir, "Pulumi.yaml");
    const doc = yaml.load(fs.readFileSync(file, "utf8")) as { runtime?: string | { name?: string } };
    const name = typeof doc.runtime === "string" ? doc.runtime : doc.runtime?.name;
    if (name !== "python" && name !== "yaml") {
        throw new Error(`${file}: runtime '${String(name)}' is not one this helper prepares (python, yaml)`);
    }
    return name;
}

/** Copies a folder without what a run leaves in it (installed packages, generated SDKs, state). */
function copyTree(from: string, to: string): void {
    const generated = new Set(["node_modules", "venv", "sdks", ".state", "__pycache__"]);
    fs.cpSync(from, to, { recursive: true, filter: (src) => !generated.has(path.basename(src)) });
}

/** npm settings for every run that may install the component's packages: from npm's cache, quietly. */
const NPM_OFFLINE = {
    npm_config_prefer_offline: "true",
    npm_config_audit: "false",
    npm_config_fund: "false",
    npm_config_update_notifier: "false",
};

/**
 * Copies the component package into a new temporary folder (with the folders beside it that `layout` names, and its
 * npm packages linked there) and runs `npm install` in its folder, as `pulumi package add` would on its first run
 * (it runs `npm install` in the component's folder each time; once installed, that takes a second).
 */
export async function copyComponent(componentDir: string, layout: ComponentLayout = {}): Promise<ComponentCopy> {
    const workDir = fs.mkdtempSync(path.join(os.tmpdir(), "vcl-lang-"));
    const top = layout.checkoutName === undefined ? workDir : path.join(workDir, layout.checkoutName);
    const dir = path.join(top, layout.checkoutName === undefined ? "component" : path.basename(componentDir));
    copyTree(componentDir, dir);
    for (const sibling of layout.siblings ?? []) {
        copyTree(path.join(componentDir, "..", sibling), path.join(top, sibling));
    }
    if (layout.nodeModules !== undefined) fs.symlinkSync(layout.nodeModules, path.join(top, "node_modules"));
    const r = await mustRun("the component's npm packages", ["npm", "install"], dir, { ...process.env, ...NPM_OFFLINE }, 300_000);
    const nodeModules = layout.nodeModules === undefined ? path.join(dir, "node_modules") : path.join(top, "node_modules");
    return { workDir, dir, nodeModules, installSeconds: r.seconds };
}

const CACHE = process.env.XDG_CACHE_HOME ?? path.join(os.homedir(), ".cache");

/**
 * What pip installs in a Python program's venv besides its requirements.txt when `pulumi package add` links the
 * generated SDK: the Python host upgrades pip, setuptools and wheel in the venv first, builds the SDK (a setup.py
 * folder) with setuptools, and the SDK requires parver and semver (pulumi's codegen writes that install_requires).
 */
const SDK_WHEELS = ["pip", "setuptools", "wheel", "parver", "semver"];

/**
 * The folder of wheels a Python program needs (its requirements.txt and SDK_WHEELS), for this machine's python3,
 * filled from PyPI on first use and kept in the user cache, keyed by the requirements and the interpreter.
 */
export async function ensureWheels(requirementsFile: string): Promise<{ dir: string; seconds: number }> {
    const t0 = Date.now();
    const py = await mustRun(
        "python3",
        ["python3", "-c", "import sys, platform; print(f'cp{sys.version_info[0]}{sys.version_info[1]}-{platform.machine()}')"],
        os.tmpdir(),
        process.env,
        30_000,
    );
    const wanted = `${fs.readFileSync(requirementsFile, "utf8")}\n${SDK_WHEELS.join("\n")}\n`;
    const key = createHash("sha256").update(wanted).digest("hex").slice(0, 16);
    const dir = path.join(CACHE, "vllm-cluster", "wheels", `pulumi-program-${key}-${py.output.trim()}`);
    if (!fs.existsSync(path.join(dir, ".complete"))) {
        fs.mkdirSync(dir, { recursive: true });
        await mustRun(
            `filling the wheel folder ${dir} from PyPI`,
            ["python3", "-m", "pip", "download", "--quiet", "--only-binary=:all:", "--dest", dir, "-r", requirementsFile, ...SDK_WHEELS],
            path.dirname(requirementsFile),
            { ...process.env, PIP_DISABLE_PIP_VERSION_CHECK: "1" },
            600_000,
        );
        fs.writeFileSync(path.join(dir, ".complete"), wanted);
    }
    return { dir, seconds: (Date.now() - t0) / 1000 };
}

/**
 * Copies the program next to the component's copy (under the program folder's own name), opens its stack on a
 * file backend in it, sets the config, and runs `pulumi package add <the component's copy>` in it (a relative
 * path), as a user would. For Python that also makes the venv (Pulumi.yaml's `virtualenv`) and installs
 * requirements.txt and the generated SDK into it, from the wheel folder. Throws with the failing step's output.
 */
export async function prepareProgram(opts: PrepareOptions): Promise<LanguageProgram> {
    const language = programLanguage(opts.programDir);
    const programDir = path.join(opts.component.workDir, path.basename(opts.programDir));
    copyTree(opts.programDir, programDir);
    fs.mkdirSync(path.join(programDir, ".state"));
    const seconds: Record<string, number> = {};
    const env: Record<string, string> = {
        ...engineEnv(programDir),
        ...NPM_OFFLINE,
        // A dynamic resource of the component runs in Pulumi's Node.js dynamic provider, which the engine starts in
        // the program's folder and which finds its module there only through NODE_PATH (pulumi/pulumi#5455)
        NODE_PATH: opts.component.nodeModules,
        ...opts.env,
    };
    if (language === "python") {
        const wheels = await ensureWheels(path.join(programDir, "requirements.txt"));
        seconds.wheels = wheels.seconds;
        // the pip runs of the Python host (venv, requirements, the generated SDK) stay offline
        Object.assign(env, { PIP_NO_INDEX: "1", PIP_FIND_LINKS: wheels.dir, PIP_DISABLE_PIP_VERSION_CHECK: "1" });
    }
    const project = await openStack(programDir, opts.stackName, env);
    project.stackFile = path.join(programDir, `Pulumi.${opts.stackName}.yaml`);
    for (const [key, v] of Object.entries(opts.config ?? {})) {
        await project.stack.setConfig(key, { value: v.value, secret: v.secret ?? false });
    }
    const add = await mustRun(
        "pulumi package add",
        ["pulumi", "package", "add", path.relative(programDir, opts.component.dir)],
        programDir,
        { ...process.env, ...env },
        300_000,
    );
    seconds["package add"] = add.seconds;
    return { language, project, seconds, packageAddOutput: add.output };
}

/** The `packages:` entries that `pulumi package add` wrote into the program copy's Pulumi.yaml. */
export function recordedPackages(lp: LanguageProgram): Record<string, unknown> {
    const doc = yaml.load(fs.readFileSync(path.join(lp.project.dir, "Pulumi.yaml"), "utf8")) as { packages?: Record<string, unknown> };
    return doc.packages ?? {};
}

/** Deletes the component's copy and every program prepared next to it, with their venvs and state. */
export function removeWork(c: ComponentCopy): void {
    fs.rmSync(c.workDir, { recursive: true, force: true });
}

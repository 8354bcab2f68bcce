/**
 * Scripts that run on hosts are files in infra/scripts/, never shell built in strings. A remote step names one
 * (with its content's hash) and its arguments; it becomes a command line only here, at the ssh edge. What a
 * resource records is that command line, so a diff shows which script (its hash) or which argument changed,
 * not a wall of shell; the script's text is read from its file when the step runs and checked against the hash.
 */
import { createHash } from "crypto";
import * as fs from "fs";
import * as path from "path";
import { shellJoin, shellQuote } from "./quote";
import { SshTarget, sshCommandLine } from "./ssh";

/** One script run on a host: which file, with which arguments, and what the step is called in messages. */
export interface RemoteStep {
    /** What the step is called in messages: "preflight on node spark-1". */
    what: string;
    /** The script's file name in infra/scripts/; its extension picks the interpreter (.sh: sh, .bash: bash, .py: python3). */
    script: string;
    /** Its arguments, one word each (never a secret: they are on the host's command line). */
    args: readonly string[];
    /** Run inside this container of the host (`docker exec`) instead of on the host itself. */
    container?: string;
    /** Scripts of infra/scripts/ shipped in front of it (functions it calls), in order. */
    libs?: readonly string[];
}

/** The directory of the scripts, where this module finds them. */
export const SCRIPTS_DIR = path.join(__dirname, "..", "scripts");

const INTERPRETERS: Record<string, string> = { ".sh": "sh", ".bash": "bash", ".py": "python3" };

export interface ScriptFile {
    name: string;
    /** The name without its extension: the script's `$0` on the host. */
    stem: string;
    /** Absolute path of the file on this machine. */
    file: string;
    interpreter: string;
    sha256: string;
    text: string;
}

/** Scripts read so far, by name (a plain object: a dynamic provider's serialized code carries it with its entries). */
const loaded: Record<string, ScriptFile> = {};

/** Reads a script of infra/scripts/ once: a name that is not a plain file name there is a programming error. */
export function scriptFile(name: string): ScriptFile {
    const cached = loaded[name];
    if (cached !== undefined) {
        return cached;
    }
    const interpreter = INTERPRETERS[path.extname(name)];
    if (path.basename(name) !== name || interpreter === undefined) {
        throw new Error(`remote step script ${JSON.stringify(name)}: not a .sh, .bash or .py file name in infra/scripts`);
    }
    const file = path.join(SCRIPTS_DIR, name);
    const text = fs.readFileSync(file, "utf8");
    const stem = path.basename(name, path.extname(name));
    const s = { name, stem, file, interpreter, sha256: createHash("sha256").update(text).digest("hex"), text };
    loaded[name] = s;
    return s;
}

/** The texts of scripts of infra/scripts/, in order, as one script (libraries first). */
export function scriptsText(names: readonly string[]): string {
    return names.map((n) => scriptFile(n).text).join("");
}

/** Text as one base64 word (the way scripts and their arguments travel). */
export function base64(text: string): string {
    return Buffer.from(text).toString("base64");
}

/**
 * Local shell lines that load the step's script, its libraries in front, into `$vcl_b64` (base64, one word): from
 * their files, by paths relative to where the command runs (the engine runs programs and providers in the same
 * directory, so the recorded command is the same in every checkout), failing loudly when a file is missing or is
 * not the one the step was planned with.
 */
function loadLines(step: RemoteStep, files: ScriptFile[]): string[] {
    const lines: string[] = [];
    const rels = files.map((s) => path.relative(process.cwd(), s.file) || s.name);
    files.forEach((s, i) => {
        const stale = `${step.what}: ${rels[i]} (run from $(pwd)) is missing or not the script this step was planned with (sha256 ${s.sha256}); run pulumi from the same checkout`;
        lines.push(
            `vcl_script=${shellQuote(rels[i])}`,
            `vcl_sha256=${s.sha256}`,
            `if ! [ -f "$vcl_script" ] || [ "$({ sha256sum 2>/dev/null || shasum -a 256; } < "$vcl_script" | cut -c1-64)" != "$vcl_sha256" ]; then echo "${stale}" >&2; exit 1; fi`,
        );
    });
    return [...lines, `vcl_b64=$(cat ${rels.map(shellQuote).join(" ")} | base64 | tr -d '\\n') || exit 1`];
}

/**
 * The remote command, as local shell text that expands to one word. Whatever the host's login shell is, it sees a
 * plain `sh -c '<boot>' <name> <base64 script> <args>`: the boot decodes the script and runs it under its
 * interpreter with the step's arguments, stdin left to the step (a secret arrives there). The script travels as one
 * base64 argument, so its text is quoted nowhere.
 */
function remoteWord(step: RemoteStep, s: ScriptFile): string {
    const exec = step.container === undefined ? "exec" : `exec docker exec ${shellQuote(step.container)}`;
    return `${shellQuote(`${shellJoin(["sh", "-c", boot(s, exec), s.stem])} `)}"$vcl_b64$vcl_args"`;
}

/**
 * Local shell lines that collect the step's arguments, quoted for the host's shell, in `$vcl_args`: one line per
 * argument, so a diff of the recorded command shows exactly the argument that changed (the CLI cuts long lines).
 */
function argLines(step: RemoteStep): string[] {
    return ["vcl_args=", ...step.args.map((a) => `vcl_args="$vcl_args "${shellQuote(shellQuote(a))}`)];
}

/** The `sh -c` text that decodes the script from its first argument and runs it with the rest, through `exec`. */
function boot(s: ScriptFile, exec: string): string {
    const run = s.interpreter === "python3" ? `python3 -c "$c"` : `${s.interpreter} -c "$c" ${s.stem}`;
    return `c=$(printf %s "$1" | base64 -d) && shift && ${exec} ${run} "$@"`;
}

/**
 * argv that runs a script of infra/scripts/ where no file of ours exists, as a container's entrypoint: the same
 * boot as a remote step, the script as one base64 argument; its own arguments and the container's Cmd follow.
 */
export function shippedScriptArgv(name: string, args: readonly string[] = []): string[] {
    const s = scriptFile(name);
    return ["/bin/sh", "-c", boot(s, "exec"), s.stem, base64(s.text), ...args];
}

/**
 * A local shell command line that runs the step on the target over the operation's shared ssh connection. When ssh
 * itself fails (exit 255) the message names the step and the host.
 */
export function remoteStepCommand(t: SshTarget, step: RemoteStep): string {
    const s = scriptFile(step.script);
    const where = `${t.user}@${t.host}:${t.port}`;
    return [
        ...loadLines(step, [...(step.libs ?? []).map(scriptFile), s]),
        ...argLines(step),
        sshCommandLine(t, remoteWord(step, s)),
        `rc=$?`,
        `if [ "$rc" -eq 255 ]; then echo ${shellQuote(`${step.what}: ssh to ${where} failed (unreachable host, key or known_hosts entry)`)} >&2; fi`,
        `exit "$rc"`,
    ].join("\n");
}

/** argv that runs the step's script on this machine, as the host would (for tests of the scripts as files). */
export function localStepArgv(step: RemoteStep): string[] {
    const s = scriptFile(step.script);
    if (step.libs !== undefined && step.libs.length > 0) {
        // the libraries in front, as the host gets them
        return [s.interpreter, "-c", scriptsText([...step.libs, step.script]), s.stem, ...step.args];
    }
    return [s.interpreter, s.file, ...step.args];
}

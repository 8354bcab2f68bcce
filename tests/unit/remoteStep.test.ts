/**
 * Remote steps: a script of infra/scripts/ with its arguments, turned into a command line only at the ssh edge.
 * Runs the real command lines with a stand-in ssh that executes the remote command on this machine through sh,
 * as a host's login shell would.
 */
import { spawnSync } from "child_process";
import * as fs from "fs";
import * as os from "os";
import * as path from "path";
import { RemoteStep, SCRIPTS_DIR, localStepArgv, remoteStepCommand, scriptFile } from "../../infra/builders/remoteStep";
import type { SshTarget } from "../../infra/builders/ssh";

const target: SshTarget = { user: "op", host: "10.0.0.9", port: 22, privateKeyPath: "/k", knownHostsFile: "/kh" };

let dir: string;
let bin: string;
beforeAll(() => {
    dir = fs.mkdtempSync(path.join(os.tmpdir(), "vcl-step-"));
    bin = path.join(dir, "bin");
    fs.mkdirSync(bin);
    // ssh [options] -- user@host COMMAND: COMMAND goes to sh -c, as sshd hands it to the login shell
    fs.writeFileSync(
        path.join(bin, "ssh"),
        [
            "#!/bin/sh",
            'while [ $# -gt 0 ]; do case "$1" in --) shift; break ;; *) shift ;; esac; done',
            'printf "%s\\n" "$2" >"$STEP_DIR/remote-command"',
            'exec sh -c "$2"',
        ].join("\n"),
        { mode: 0o755 },
    );
});
afterAll(() => fs.rmSync(dir, { recursive: true, force: true }));

function run(cmd: string, opts: { cwd?: string; input?: string } = {}) {
    return spawnSync("sh", ["-c", cmd], {
        encoding: "utf8",
        cwd: opts.cwd,
        input: opts.input,
        env: { ...process.env, PATH: `${bin}:${process.env.PATH}`, STEP_DIR: dir, XDG_CACHE_HOME: path.join(dir, "c") },
    });
}

/** A script of our own in infra/scripts for the duration of one test. */
function withScript(name: string, text: string, body: () => void): void {
    const file = path.join(SCRIPTS_DIR, name);
    fs.writeFileSync(file, text);
    try {
        body();
    } finally {
        fs.rmSync(file);
    }
}

describe("remote steps", () => {
    test("the script runs on the host with its arguments as given (quotes, spaces, $) and the step's stdin", () => {
        const text = '#!/bin/sh\nprintf "[%s]" "$0" "$@"; printf "\\n"; cat\n';
        withScript("vcl-test-echo.sh", text, () => {
            const step: RemoteStep = { what: "echo on node a", script: "vcl-test-echo.sh", args: ["x y", "it's", "$HOME", "a=*"] };
            const r = run(remoteStepCommand(target, step), { input: "from stdin\n" });
            expect(r.stderr).toBe("");
            expect(r.status).toBe(0);
            expect(r.stdout).toBe("[vcl-test-echo][x y][it's][$HOME][a=*]\nfrom stdin\n");
            // the host is handed a fixed boot, the script as one base64 word, and the arguments: no script text
            const remote = fs.readFileSync(path.join(dir, "remote-command"), "utf8");
            expect(remote).toContain(Buffer.from(text).toString("base64"));
            expect(remote).not.toContain("[%s]");
        });
    });

    test("what a resource records names the script by its hash and lists the arguments, not the script's text", () => {
        const step: RemoteStep = { what: "preflight on node a", script: "preflight.sh", args: ["node=a"] };
        const cmd = remoteStepCommand(target, step);
        const s = scriptFile("preflight.sh");
        expect(cmd).toContain(`vcl_sha256=${s.sha256}`);
        expect(cmd).toContain("vcl_script=infra/scripts/preflight.sh");
        expect(cmd).toContain('\nvcl_args="$vcl_args "node=a\n');
        expect(cmd).not.toContain("fabric");
        // a changed argument changes exactly the argument's own line in the record (the CLI's diff cuts long lines)
        const other = remoteStepCommand(target, { ...step, args: ["node=b"] });
        const changed = other.split("\n").filter((l, i) => l !== cmd.split("\n")[i]);
        expect(changed).toEqual(['vcl_args="$vcl_args "node=b']);
        expect(
            Math.max(
                ...cmd
                    .split("\n")
                    .filter((l) => l.startsWith("vcl_"))
                    .map((l) => l.length),
            ),
        ).toBeLessThan(100);
    });

    test("a python step runs under python3 with its arguments", () => {
        withScript("vcl-test-argv.py", "import json, sys\nprint(json.dumps(sys.argv[1:]))\n", () => {
            const r = run(remoteStepCommand(target, { what: "probe", script: "vcl-test-argv.py", args: ['{"a": 1}', "b c"] }));
            expect(r.stderr).toBe("");
            expect(JSON.parse(r.stdout)).toEqual(['{"a": 1}', "b c"]);
            expect(localStepArgv({ what: "probe", script: "vcl-test-argv.py", args: ["x"] })).toEqual([
                "python3",
                path.join(SCRIPTS_DIR, "vcl-test-argv.py"),
                "x",
            ]);
        });
    });

    test("a step with a container runs its script there (docker exec), with the same arguments", () => {
        // docker exec CONTAINER ARGV...: records the container, then runs ARGV here
        fs.writeFileSync(
            path.join(bin, "docker"),
            '#!/bin/sh\n[ "$1" = exec ] || exit 2\nprintf "%s\\n" "$2" >"$STEP_DIR/container"\nshift 2\nexec "$@"\n',
            { mode: 0o755 },
        );
        withScript("vcl-test-argv.py", "import json, sys\nprint(json.dumps(sys.argv[1:]))\n", () => {
            const step: RemoteStep = { what: "probe", script: "vcl-test-argv.py", container: "vllm-ray-head", args: ["{}"] };
            const r = run(remoteStepCommand(target, step));
            expect(r.stderr).toBe("");
            expect(JSON.parse(r.stdout)).toEqual(["{}"]);
            expect(fs.readFileSync(path.join(dir, "container"), "utf8")).toBe("vllm-ray-head\n");
        });
        fs.rmSync(path.join(bin, "docker"));
    });

    test("a script file that is missing or changed since the step was planned fails loudly, before any ssh", () => {
        const cmd = remoteStepCommand(target, { what: "preflight on node a", script: "preflight.sh", args: [] });
        // another checkout whose preflight.sh differs
        const other = path.join(dir, "checkout");
        fs.mkdirSync(path.join(other, "infra", "scripts"), { recursive: true });
        fs.writeFileSync(path.join(other, "infra", "scripts", "preflight.sh"), "#!/bin/sh\necho planted\n");
        fs.rmSync(path.join(dir, "remote-command"), { force: true });
        const changed = run(cmd, { cwd: other });
        expect(changed.status).toBe(1);
        expect(changed.stdout).toBe("");
        expect(changed.stderr).toContain(
            `preflight on node a: infra/scripts/preflight.sh (run from ${other}) is missing or not the script this step was planned with (sha256 ${
                scriptFile("preflight.sh").sha256
            })`,
        );
        expect(fs.existsSync(path.join(dir, "remote-command"))).toBe(false);
        const missing = run(cmd, { cwd: dir });
        expect(missing.status).toBe(1);
        expect(missing.stderr).toContain("infra/scripts/preflight.sh (run from");
    });

    test("an unknown script or interpreter is a programming error", () => {
        expect(() => scriptFile("../index.ts")).toThrow("not a .sh, .bash or .py file name in infra/scripts");
        expect(() => scriptFile("x.rb")).toThrow("not a .sh, .bash or .py file name in infra/scripts");
    });

    test("ssh failing (exit 255) names the step and the host", () => {
        const fail = path.join(dir, "fail");
        fs.mkdirSync(fail, { recursive: true });
        fs.writeFileSync(path.join(fail, "ssh"), "#!/bin/sh\nexit 255\n", { mode: 0o755 });
        const cmd = remoteStepCommand({ ...target, host: "10.0.0.10" }, { what: "preflight on node b", script: "preflight.sh", args: [] });
        const r = spawnSync("sh", ["-c", cmd], {
            encoding: "utf8",
            env: { ...process.env, PATH: `${fail}:${process.env.PATH}`, XDG_CACHE_HOME: path.join(dir, "c") },
        });
        expect(r.status).toBe(255);
        expect(r.stderr).toBe("preflight on node b: ssh to op@10.0.0.10:22 failed (unreachable host, key or known_hosts entry)\n");
    });
});

/**
 * The operator-side scripts the program still composes in TypeScript (they weave ssh command lines for several
 * hosts together: the image's presence and inspection, the chain copies with their private agent): every variant
 * passes shellcheck, as the host scripts of infra/scripts/ do in the static checks. A shellcheck that cannot run
 * fails this test; it is never skipped.
 */
import { spawnSync } from "child_process";
import { ChainHop } from "../../infra/builders/chain";
import { ImageOrigin, imageEnsureScript, imageInspectScript } from "../../infra/builders/image";
import { chainCopyScript } from "../../infra/builders/imageChain";
import { modelChainCopyScript } from "../../infra/builders/modelChain";
import type { SshTarget } from "../../infra/builders/ssh";

const target = (i: number, port = 22): SshTarget => ({
    user: "root",
    host: `10.231.0.${10 + i}`,
    port,
    privateKeyPath: "/home/op/.ssh/id_ed25519",
    knownHostsFile: "/home/op/.ssh/known_hosts",
});
const hop = (i: number): ChainHop => ({
    node: `spark-${i}`,
    target: target(i, i === 3 ? 2222 : 22),
    peerHost: `10.232.0.${10 + i}`,
    knownHosts: [`10.231.0.${10 + i} ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIK${i}`],
});

function shellcheck(what: string, script: string): string {
    const r = spawnSync("shellcheck", ["-s", "bash", "-S", "warning", "-"], { input: script, encoding: "utf8" });
    if (r.error) throw new Error(`shellcheck cannot run (${r.error.message}): npm test installs it`);
    return r.status === 0 ? "" : `${what}:\n${r.stdout}`;
}

test("every generated operator-side script is shellcheck-clean", () => {
    const origins: [string, ImageOrigin][] = [
        ["host", { kind: "host", node: "spark-1", target: target(1) }],
        ["local", { kind: "local" }],
        ["registry", { kind: "registry" }],
    ];
    const scripts: [string, string][] = [
        ...origins.map(([k, o]): [string, string] => [`imageEnsureScript (${k})`, imageEnsureScript(o, target(2), "spark-2", "img:1")]),
        ["imageInspectScript", imageInspectScript(target(2, 2222), "img:1")],
        [
            "chainCopyScript (host)",
            chainCopyScript({ kind: "host", node: "spark-1", target: target(1) }, "img:1", [hop(2), hop(3)], target(1)),
        ],
        ["chainCopyScript (local)", chainCopyScript({ kind: "local" }, "img:1", [hop(2), hop(3)], target(1))],
        [
            "modelChainCopyScript",
            modelChainCopyScript(target(1), "/models/m", ["a", "b c"], [hop(2), hop(3)], target(1), { index: 1, count: 2 }),
        ],
    ];
    expect(scripts.map(([what, s]) => shellcheck(what, s)).join("")).toBe("");
});

test("the check is live: a script with a warning is reported", () => {
    expect(shellcheck("bad", "unused=1\n")).toContain("SC2034");
});

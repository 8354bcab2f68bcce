/** The Roster provider: a host leaving the stack is cleared before anything that depends on the host list. */
import { spawnSync } from "child_process";
import * as fs from "fs";
import * as os from "os";
import * as path from "path";
import { stackContainersRemoveStep } from "../../infra/builders/node";
import { localStepArgv } from "../../infra/builders/remoteStep";
import { rosterProvider } from "../../infra/providers/roster";

let dir: string;
beforeEach(() => (dir = fs.mkdtempSync(path.join(os.tmpdir(), "vcl-roster-"))));
afterEach(() => fs.rmSync(dir, { recursive: true, force: true }));

/** A member whose eviction leaves a mark (or fails with `code`). */
const member = (name: string, code = 0) => ({ name, evictScript: `touch ${dir}/${name}; exit ${code}` });
const evicted = () => fs.readdirSync(dir).sort();

test("a changed member set is an update; order and scripts alone are not", async () => {
    const olds = { members: [member("a"), member("b")] };
    expect(await rosterProvider.diff!("roster", olds, { members: [member("b"), member("a")] })).toEqual({ changes: false });
    expect((await rosterProvider.diff!("roster", olds, { members: [member("a")] })).changes).toBe(true);
    expect((await rosterProvider.diff!("roster", olds, { members: [member("a"), member("b"), member("c")] })).replaces).toEqual([]);
});

test("create records the members and clears nobody", async () => {
    const r = await rosterProvider.create!({ members: [member("b"), member("a")] });
    expect(r.outs.version).toBe("a,b");
    expect(evicted()).toEqual([]);
});

test("update clears exactly the hosts that left, and records the new version", async () => {
    const r = await rosterProvider.update!(
        "roster",
        { members: [member("a"), member("b"), member("c")] },
        { members: [member("a"), member("d")] },
    );
    expect(evicted()).toEqual(["b", "c"]);
    expect(r.outs!.version).toBe("a,d");
    expect(r.outs!.unreachable).toEqual([]);
});

test("a leaving host that ssh cannot reach is recorded, not fatal; any other failure names the host", async () => {
    const r = await rosterProvider.update!("roster", { members: [member("a"), member("gone", 255)] }, { members: [member("a")] });
    expect(r.outs!.unreachable).toEqual(["gone"]);
    await expect(
        rosterProvider.update!("roster", { members: [member("a"), member("bad", 1)] }, { members: [member("a")] }),
    ).rejects.toThrow(/clearing host bad, which left the stack, failed \(exit 1\)/);
});

test("the eviction step removes the stack's containers only, by label", () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), "vcl-evict-"));
    // docker: `ps` lists two containers for the stack's label only, `rm -f` records what it removes
    fs.writeFileSync(
        path.join(dir, "docker"),
        '#!/bin/sh\ncase "$*" in "ps -aq --filter label=vllm-cluster.stack=prod") printf "a1\\nb2\\n" ;; ps*) ;; "rm -f "*) echo "$*" >>"$RM_LOG" ;; *) exit 2 ;; esac\n',
        { mode: 0o755 },
    );
    const log = path.join(dir, "rm.log");
    const run = (stack: string) => {
        const [sh, ...args] = localStepArgv(stackContainersRemoveStep("spark-2", stack));
        return spawnSync(sh, args, { encoding: "utf8", env: { ...process.env, PATH: `${dir}:${process.env.PATH}`, RM_LOG: log } });
    };
    expect(run("prod").status).toBe(0);
    expect(fs.readFileSync(log, "utf8")).toBe("rm -f a1 b2\n");
    // another stack's name matches nothing: nothing is removed
    fs.rmSync(log);
    expect(run("dev").status).toBe(0);
    expect(fs.existsSync(log)).toBe(false);
    fs.rmSync(dir, { recursive: true });
});

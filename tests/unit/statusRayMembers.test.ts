/**
 * infra/scripts/ray_members.py (the status probe runs it in the Ray head container) against a fake `ray` package:
 * the GCS client's node table when Ray has one, a driver's ray.nodes() when it does not, only live nodes, and a
 * failure that names the address.
 */
import { spawnSync } from "child_process";
import * as fs from "fs";
import * as os from "os";
import * as path from "path";
import { scriptFile } from "../../infra/builders/remoteStep";

let dir: string;
beforeEach(() => (dir = fs.mkdtempSync(path.join(os.tmpdir(), "vcl-ray-members-"))));
afterEach(() => fs.rmSync(dir, { recursive: true, force: true }));

/** A fake `ray` package: `raylet` is the text of ray/_raylet.py (none: no such module), `init` of ray/__init__.py. */
function fakeRay(init: string, raylet?: string): void {
    fs.mkdirSync(path.join(dir, "ray"));
    fs.writeFileSync(path.join(dir, "ray", "__init__.py"), init);
    if (raylet !== undefined) fs.writeFileSync(path.join(dir, "ray", "_raylet.py"), raylet);
}

/** Runs the script as the probe does: python3 -c "<its text>" ADDRESS. */
function run(...args: string[]) {
    return spawnSync("python3", ["-c", scriptFile("ray_members.py").text, ...args], {
        encoding: "utf8",
        env: { ...process.env, PYTHONPATH: dir },
    });
}

const GCS = `
class _State:
    _names = {0: "ALIVE", 1: "DEAD"}
    @classmethod
    def Name(cls, v):
        return cls._names[v]

class _Info:
    GcsNodeState = _State
    def __init__(self, ip, state, gpus, head):
        self.node_manager_address = ip
        self.state = state
        self.resources_total = {"GPU": gpus} if gpus else {}
        self.is_head_node = head

class GcsClient:
    def __init__(self, address):
        if address != "10.232.0.11:6379":
            raise ConnectionError("no GCS at " + address)
    def get_all_node_info(self, timeout):
        return {b"a": _Info("10.232.0.12", 0, 1.0, False), b"b": _Info("10.232.0.11", 0, 1.0, True), b"c": _Info("10.231.0.12", 1, 1.0, False)}
`;

test("the GCS's node table: live nodes only, sorted by address, with their GPUs", () => {
    fakeRay("", GCS);
    const r = run("10.232.0.11:6379");
    expect(r.stderr).toBe("");
    expect(r.status).toBe(0);
    expect(JSON.parse(r.stdout)).toEqual({
        via: "gcs",
        members: [
            { ip: "10.232.0.11", gpus: 1, head: true },
            { ip: "10.232.0.12", gpus: 1, head: false },
        ],
    });
});

test("a Ray without the GCS client: a driver's ray.nodes(), live nodes only", () => {
    fakeRay(`
def init(address, **kw):
    assert address == "10.232.0.11:6379"

def nodes():
    return [
        {"NodeManagerAddress": "10.232.0.11", "Alive": True, "Resources": {"GPU": 1.0, "node:__internal_head__": 1.0}},
        {"NodeManagerAddress": "10.231.0.12", "Alive": True, "Resources": {}},
        {"NodeManagerAddress": "10.232.0.12", "Alive": False, "Resources": {"GPU": 1.0}},
    ]
`);
    const r = run("10.232.0.11:6379");
    expect(r.status).toBe(0);
    expect(JSON.parse(r.stdout)).toEqual({
        via: "driver",
        members: [
            { ip: "10.231.0.12", gpus: 0, head: false },
            { ip: "10.232.0.11", gpus: 1, head: true },
        ],
    });
});

test("no GCS at the address, or no argument: exits 1 naming it", () => {
    fakeRay("", GCS);
    const r = run("10.232.0.11:6390");
    expect(r.status).toBe(1);
    expect(r.stdout).toBe("");
    expect(r.stderr).toBe("ray-members: cannot ask Ray's GCS at 10.232.0.11:6390: no GCS at 10.232.0.11:6390\n");
    const none = run();
    expect(none.status).toBe(1);
    expect(none.stderr).toBe("ray-members: usage: ray_members.py <head fabric IP>:<gcs port>\n");
});

/**
 * The integration harness's move of a stack onto other simulated hosts (tests/integration/engine.ts relocate): npm
 * test runs the native and Hub files on hosts 3 and 4 while the backend-ray file runs on 1 and 2.
 */
import * as fs from "fs";
import * as os from "os";
import * as path from "path";
import { relocate } from "../integration/engine";
import { stackConfig } from "../integration/hosts";

const ROOT = path.join(__dirname, "..", "..");
let dir: string;

beforeEach(() => {
    dir = fs.mkdtempSync(path.join(os.tmpdir(), "vcl-relocate-"));
});
afterEach(() => fs.rmSync(dir, { recursive: true, force: true }));

function copyOf(stack: string): string {
    const f = path.join(dir, `Pulumi.${stack}.yaml`);
    fs.copyFileSync(path.join(ROOT, "stacks", `Pulumi.${stack}.yaml`), f);
    return f;
}

describe("relocate", () => {
    test.each(["local", "local-native"])(
        "%s on hosts 3 and 4: the nodes' addresses and the state directory move, nothing else",
        (stack) => {
            const f = copyOf(stack);
            const before = stackConfig(f);
            relocate(f, "3,4");
            const after = stackConfig(f);
            expect(after.nodes.map((n) => [n.name, n.sshHost, n.fabricIp])).toEqual([
                ["spark-1", "10.231.0.13", "10.232.0.13"],
                ["spark-2", "10.231.0.14", "10.232.0.14"],
            ]);
            expect(after.stateDir).toBe(`${before.stateDir}-h3-h4`);
            // the derived fields (head, workers) carry the new addresses too: mapped back, the rest is as it was
            const back = JSON.stringify({ ...after, stateDir: before.stateDir }).replace(
                /10\.23([12])\.0\.1([34])/g,
                (_, net: string, h: string) => `10.23${net}.0.1${Number(h) - 2}`,
            );
            expect(JSON.parse(back)).toEqual(JSON.parse(JSON.stringify(before)));
        },
    );

    test("a list that is not of host numbers, too few hosts, or an address that is no simulated host's is refused", () => {
        const f = copyOf("local");
        expect(() => relocate(f, "3,x")).toThrow(/VCL_IT_HOSTS: "3,x" is not a list of testbed host numbers/);
        expect(() => relocate(f, "3")).toThrow(/VCL_IT_HOSTS: 1 host\(s\) for 2 nodes/);
        fs.writeFileSync(f, fs.readFileSync(f, "utf8").replace("sshHost: 10.231.0.11", "sshHost: 192.168.1.5"));
        expect(() => relocate(f, "3,4")).toThrow(/node spark-1's sshHost 192\.168\.1\.5 is not a simulated host's/);
    });
});

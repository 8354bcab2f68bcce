/**
 * tests/lib/timings-report.js on a results directory written by another clone (CI's): each file's wall time from the
 * stages' jest reports and the fault suite's, joined with its ledger under the path inside the checkout.
 */
import { spawnSync } from "child_process";
import * as fs from "fs";
import * as os from "os";
import * as path from "path";

const SCRIPT = path.join(__dirname, "..", "lib", "timings-report.js");

test("another clone's absolute paths and the fault suite's own report are joined with the ledgers by the file's path", () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), "vcl-timings-"));
    try {
        const report = (name: string, seconds: number) => ({
            testResults: [{ name: `/elsewhere/clone/${name}`, startTime: 1_000, endTime: 1_000 + seconds * 1000 }],
        });
        fs.writeFileSync(path.join(dir, "integration-ray.json"), JSON.stringify(report("tests/integration/cluster.test.ts", 899)));
        fs.mkdirSync(path.join(dir, "faults"));
        fs.writeFileSync(path.join(dir, "faults", "jest.json"), JSON.stringify(report("tests/faults/faults.test.ts", 1481)));
        fs.mkdirSync(path.join(dir, "timings"));
        const ledger = (file: string, seconds: number) => JSON.stringify({ file, ledger: { "pulumi up": { seconds, count: 3 } } });
        fs.writeFileSync(path.join(dir, "timings", "a.json"), ledger("tests/integration/cluster.test.ts", 590));
        fs.writeFileSync(path.join(dir, "timings", "b.json"), ledger("tests/faults/faults.test.ts", 1069));
        const r = spawnSync(process.execPath, [SCRIPT, "--json", dir], { encoding: "utf8" });
        expect(r.status).toBe(0);
        expect(JSON.parse(r.stdout)).toEqual({
            "tests/faults/faults.test.ts": { wallSeconds: 1481, ledger: { "pulumi up": { seconds: 1069, count: 3 } } },
            "tests/integration/cluster.test.ts": { wallSeconds: 899, ledger: { "pulumi up": { seconds: 590, count: 3 } } },
        });
    } finally {
        fs.rmSync(dir, { recursive: true, force: true });
    }
});

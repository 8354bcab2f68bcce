/**
 * setup/engine.lock pins the Docker Engine 28 that the simulated hosts can run (setup/engine.sh builds it from the Go
 * module proxy): each module at a version and its sum, which the build checks before it compiles anything. No build
 * runs here: `--check` with an empty cache says what is missing and exits 2.
 */
import { spawnSync } from "child_process";
import * as fs from "fs";
import * as os from "os";
import * as path from "path";

const ROOT = path.join(__dirname, "..", "..");

function rows(): string[][] {
    return fs
        .readFileSync(path.join(ROOT, "setup", "engine.lock"), "utf8")
        .split("\n")
        .filter((l) => l.trim() !== "" && !l.startsWith("#"))
        .map((l) => l.split("\t"));
}

describe("setup/engine.lock", () => {
    test("pins dockerd 28 and containerd 2.4 by module version and sum, and names the runc it takes", () => {
        const byName = Object.fromEntries(rows().map((r) => [r[1], r]));
        expect(rows().every((r) => r.length === 5)).toBe(true);
        expect(byName.docker.slice(0, 4)).toEqual(["module", "docker", "28.5.2", "github.com/docker/docker@v28.5.2+incompatible"]);
        expect(byName.containerd.slice(0, 4)).toEqual(["module", "containerd", "2.4.2", "github.com/containerd/containerd/v2@v2.4.2"]);
        for (const r of [byName.docker, byName.containerd]) {
            // the go.sum form of a module zip's hash: h1: and a base64 SHA-256
            expect(r[4]).toMatch(/^h1:[A-Za-z0-9+/]{43}=$/);
            // the engine version is the module's
            expect(r[3]).toContain(`@v${r[2]}`);
        }
        expect(byName.runc).toEqual(["runtime", "runc", "1.1.5", "debian", "-"]);
    });

    test("--check builds nothing: with an empty cache it names the missing build and exits 2", () => {
        const cache = fs.mkdtempSync(path.join(os.tmpdir(), "engine-cache-"));
        try {
            const r = spawnSync("bash", ["setup/engine.sh", "--check"], {
                cwd: ROOT,
                encoding: "utf8",
                env: { ...process.env, VCL_ENGINE_CACHE: cache },
                timeout: 30_000,
            });
            expect(r.status).toBe(2);
            expect(r.stdout).toBe("");
            expect(r.stderr).toMatch(new RegExp(`^engine: not built: ${cache}/docker-v28\\.5\\.2-containerd-v2\\.4\\.2-[0-9a-f]{12}\\n$`));
            expect(fs.readdirSync(cache)).toEqual([]);
        } finally {
            fs.rmSync(cache, { recursive: true, force: true });
        }
    });
});

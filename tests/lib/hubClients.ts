/**
 * The huggingface_hub client versions model.hub's download is tested with, each in a venv of its own made from the
 * package index the machine's pip is configured with, kept in the user's cache (outside the repository) and made
 * again only when missing. The images users bring carry whichever client their base has: 0.x speaks requests,
 * 1.x and later httpx.
 */
import { execFileSync } from "child_process";
import * as fs from "fs";
import * as os from "os";
import * as path from "path";

/** The last 0.x (requests), a 1.x and the 2.x the test image carries (httpx). */
export const HUB_CLIENTS = ["0.36.2", "1.33.0", "2.4.0"] as const;

/** The python of a venv holding huggingface_hub `version` (made on first use: about 15 s from the package index). */
export function hubClientPython(version: string): string {
    const cache = process.env.XDG_CACHE_HOME || path.join(os.homedir(), ".cache");
    const py = execFileSync("python3", ["-c", "import sys; print('%d.%d' % sys.version_info[:2])"], { encoding: "utf8" }).trim();
    const dir = path.join(cache, "vllm-cluster", "hub-clients", `huggingface_hub-${version}-py${py}`);
    const python = path.join(dir, "bin", "python");
    if (fs.existsSync(path.join(dir, ".ready"))) return python;
    // made beside it and moved into place whole, so a cut install is never taken for a venv
    const tmp = `${dir}.partial-${process.pid}`;
    fs.rmSync(tmp, { recursive: true, force: true });
    fs.mkdirSync(path.dirname(dir), { recursive: true });
    execFileSync("python3", ["-m", "venv", tmp], { stdio: "pipe" });
    execFileSync(
        path.join(tmp, "bin", "python"),
        ["-m", "pip", "install", "--quiet", "--disable-pip-version-check", `huggingface_hub==${version}`],
        { stdio: "pipe", timeout: 300_000 },
    );
    fs.writeFileSync(path.join(tmp, ".ready"), `huggingface_hub==${version}\n`);
    fs.rmSync(dir, { recursive: true, force: true });
    fs.renameSync(tmp, dir);
    return python;
}

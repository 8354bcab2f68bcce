/** Real ed25519 host public keys for the chain tests: ssh-add looks them up to bind the agent's chain constraints. */
import { execFileSync } from "child_process";
import * as fs from "fs";
import * as os from "os";
import * as path from "path";

/** `n` freshly generated host public keys (`type base64`), host i's at index i - 1. */
export function generatedHostKeys(n: number): string[] {
    return Array.from({ length: n }, (_, i) => {
        const d = fs.mkdtempSync(path.join(os.tmpdir(), "vcl-hostkey-"));
        execFileSync("ssh-keygen", ["-q", "-t", "ed25519", "-N", "", "-C", `host${i + 1}`, "-f", path.join(d, "k")]);
        const pub = fs.readFileSync(path.join(d, "k.pub"), "utf8").split(" ").slice(0, 2).join(" ");
        fs.rmSync(d, { recursive: true, force: true });
        return pub;
    });
}

/**
 * The KeyFile provider with the real install/check/remove steps (infra/scripts/secret_file.sh) run as files on a
 * local directory (the program runs them over ssh; here the "host" is this machine's temp dir).
 */
import * as fs from "fs";
import * as os from "os";
import * as path from "path";
import { apiKeyFile, apiKeyHash, secretCheckStep, secretInstallStep, secretRemoveStep } from "../../infra/builders/key";
import { shellJoin } from "../../infra/builders/quote";
import { RemoteStep, localStepArgv } from "../../infra/builders/remoteStep";
import { apiKeyHostPath } from "../../infra/builders/node";
import { keyFileProvider } from "../../infra/providers/keyFile";

const KEY = "k".repeat(24) + "0123456789abcdefghijklmn";
let stateDir: string;
let file: string;

/** The step's script run as a file on this machine, the "host". */
const local = (step: RemoteStep) => shellJoin(localStepArgv(step));

function inputs(key = KEY) {
    return {
        what: "api key file on node spark-1",
        installScript: local(secretInstallStep(apiKeyFile(stateDir, "spark-1"))),
        checkScript: local(secretCheckStep(apiKeyFile(stateDir, "spark-1"))),
        removeScript: local(secretRemoveStep(apiKeyFile(stateDir, "spark-1"))),
        key,
        keyHash: apiKeyHash(key),
    };
}

beforeEach(() => {
    stateDir = fs.mkdtempSync(path.join(os.tmpdir(), "vcl-keyfile-"));
    file = apiKeyHostPath(stateDir, "spark-1");
});
afterEach(() => fs.rmSync(stateDir, { recursive: true, force: true }));

async function created() {
    const r = await keyFileProvider.create!(inputs());
    return { id: r.id, outs: r.outs as ReturnType<typeof inputs> & { intact?: boolean; path?: string } };
}

test("create writes the key from stdin to a mode-600 file and records its path", async () => {
    const { outs } = await created();
    expect(fs.readFileSync(file, "utf8")).toBe(KEY);
    expect(fs.statSync(file).mode & 0o777).toBe(0o600);
    expect(outs.path).toBe(file);
    expect(outs.intact).toBe(true);
});

test("refresh finds an intact file intact, and no change is planned", async () => {
    const { id, outs } = await created();
    const read = await keyFileProvider.read!(id, outs);
    expect(read.props!.intact).toBe(true);
    expect((await keyFileProvider.diff!(id, read.props, inputs())).changes).toBe(false);
});

test.each([
    ["removed", () => fs.rmSync(file)],
    ["emptied", () => fs.writeFileSync(file, "")],
    ["replaced by an empty directory (what a bind mount of a missing file leaves)", () => (fs.rmSync(file), fs.mkdirSync(file))],
    ["holding another key", () => fs.writeFileSync(file, "another-key")],
])("refresh of a key file %s records it broken; the next up installs it again", async (_what, damage) => {
    const { id, outs } = await created();
    damage();
    const read = await keyFileProvider.read!(id, outs);
    expect(read.props!.intact).toBe(false);
    const diff = await keyFileProvider.diff!(id, read.props, inputs());
    expect(diff).toEqual({ changes: true, replaces: [], stables: [] });
    const updated = await keyFileProvider.update!(id, read.props, inputs());
    expect(updated.outs!.intact).toBe(true);
    expect(fs.readFileSync(file, "utf8")).toBe(KEY);
});

test("a new key is an update that rewrites the file in place", async () => {
    const { id, outs } = await created();
    const next = inputs("n".repeat(48));
    expect(await keyFileProvider.diff!(id, outs, next)).toEqual({ changes: true, replaces: [], stables: [] });
    await keyFileProvider.update!(id, outs, next);
    expect(fs.readFileSync(file, "utf8")).toBe("n".repeat(48));
});

test("an empty key is refused and nothing is installed", async () => {
    await expect(keyFileProvider.create!(inputs(""))).rejects.toThrow(
        /api key file on node spark-1: install failed.*\n.*empty api key on stdin/,
    );
    expect(fs.existsSync(file)).toBe(false);
});

test("delete removes the file; the error of a failing check names the key file", async () => {
    const { id, outs } = await created();
    await keyFileProvider.delete!(id, outs);
    expect(fs.existsSync(file)).toBe(false);
    await expect(keyFileProvider.read!(id, { ...outs, checkScript: "echo 'ssh: connect refused' >&2; exit 255" })).rejects.toThrow(
        /api key file on node spark-1: check failed \(exit 255\):\nssh: connect refused/,
    );
});

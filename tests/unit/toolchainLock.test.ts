/**
 * setup/toolchain.lock pins the CLI, the language host and each provider plugin that setup/toolchain.sh builds or
 * installs. The engine loads a plugin at exactly the version its npm package declares, so a pin that drifts from
 * package.json would make `pulumi up` look for a plugin that was never built.
 */
import * as fs from "fs";
import * as path from "path";

const ROOT = path.join(__dirname, "..", "..");

interface LockRow {
    kind: string;
    name: string;
    version: string;
    archive: string;
    sha256: string;
    origin: string;
}

function lockRows(): LockRow[] {
    return fs
        .readFileSync(path.join(ROOT, "setup", "toolchain.lock"), "utf8")
        .split("\n")
        .filter((l) => l.trim() !== "" && !l.startsWith("#"))
        .map((l) => {
            const [kind, name, version, archive, sha256, origin, ...rest] = l.split("\t");
            expect(rest).toEqual([]);
            return { kind, name, version, archive, sha256, origin };
        });
}

function npmPackage(name: string): { version: string; pulumi?: { name?: string; version?: string } } {
    return JSON.parse(fs.readFileSync(path.join(ROOT, "node_modules", name, "package.json"), "utf8"));
}

const rootPackage = JSON.parse(fs.readFileSync(path.join(ROOT, "package.json"), "utf8")) as {
    dependencies: Record<string, string>;
};

describe("setup/toolchain.lock", () => {
    const rows = lockRows();

    test.each(rows.filter((r) => r.kind === "resource").map((r) => [r.name, r.version]))(
        "plugin %s %s equals the plugin version its npm package declares, and package.json pins that package exactly",
        (name, version) => {
            const pkg = npmPackage(`@pulumi/${name}`);
            expect(pkg.pulumi?.name).toBe(name);
            expect(pkg.pulumi?.version).toBe(version);
            expect(rootPackage.dependencies[`@pulumi/${name}`]).toBe(pkg.version);
        },
    );

    test("the CLI and the language host are the release of the @pulumi/pulumi SDK the program uses", () => {
        const sdk = npmPackage("@pulumi/pulumi").version;
        expect(rows.find((r) => r.kind === "cli")?.version).toBe(sdk);
        expect(rows.find((r) => r.kind === "language" && r.name === "nodejs")?.version).toBe(sdk);
        expect(rootPackage.dependencies["@pulumi/pulumi"]).toBe(sdk);
    });

    test("every plugin the program's packages need has a row, and every archive a sha256", () => {
        const plugins = rows.filter((r) => r.kind === "resource").map((r) => r.name);
        const needed = Object.keys(rootPackage.dependencies)
            .filter((d) => d !== "@pulumi/pulumi" && npmPackage(d).pulumi?.name)
            .map((d) => npmPackage(d).pulumi!.name!);
        expect(plugins.sort()).toEqual(needed.sort());
        for (const r of rows.filter((x) => x.archive !== "-")) {
            expect(r.sha256).toMatch(/^[0-9a-f]{64}$/);
            expect(r.archive).toMatch(/\.tar\.gz$/);
        }
    });
});

/**
 * setup/toolchain.lock pins the CLI, the language hosts and each provider plugin that setup/toolchain.sh builds or
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

    test("the Python language host is the CLI's release too, and a Python program pins the `pulumi` package at it", () => {
        const cli = rows.find((r) => r.kind === "cli")?.version;
        expect(rows.find((r) => r.kind === "language" && r.name === "python")?.version).toBe(cli);
        const requirements = fs.readFileSync(path.join(ROOT, "tests", "fixtures", "languages", "python", "requirements.txt"), "utf8");
        expect(requirements).toMatch(new RegExp(`^pulumi==${cli?.replace(/\./g, "\\.")}$`, "m"));
    });

    test("every language host row has a builder in setup/toolchain.sh, a semver version (the CLI refuses others)", () => {
        const script = fs.readFileSync(path.join(ROOT, "setup", "toolchain.sh"), "utf8");
        const languages = rows.filter((r) => r.kind === "language");
        expect(languages.map((r) => r.name).sort()).toEqual(["nodejs", "python", "yaml"]);
        for (const r of languages) {
            expect(script).toContain(`build_language_${r.name}() {`);
            expect(r.version).toMatch(/^\d+\.\d+\.\d+(-[0-9A-Za-z.-]+)?(\+[0-9A-Za-z.-]+)?$/);
        }
    });

    test("the fixture component package pins the program's Pulumi packages (the plugins the toolchain installs)", () => {
        const fixture = JSON.parse(
            fs.readFileSync(path.join(ROOT, "tests", "fixtures", "languages", "component", "package.json"), "utf8"),
        ) as {
            dependencies: Record<string, string>;
        };
        for (const [name, version] of Object.entries(fixture.dependencies)) {
            expect([name, rootPackage.dependencies[name]]).toEqual([name, version]);
        }
    });

    test("rows that name the same archive pin the same sha256", () => {
        for (const r of rows.filter((x) => x.archive !== "-")) {
            expect(rows.filter((x) => x.archive === r.archive).map((x) => x.sha256)).toEqual(
                rows.filter((x) => x.archive === r.archive).map(() => r.sha256),
            );
        }
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

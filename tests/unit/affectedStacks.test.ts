import { execFileSync } from "child_process";
import * as fs from "fs";
import * as os from "os";
import * as path from "path";

import { affectedStacks, listStacks } from "../../setup/gitops/affected-stacks";

const stacks = ["four-node", "local", "spark"];

describe("affectedStacks", () => {
    test("a stack file change affects only that stack", () => {
        const r = affectedStacks({ changed: ["stacks/Pulumi.spark.yaml"], stacks });
        expect(r.stacks).toEqual(["spark"]);
        expect(r.reasons.spark).toMatch(/stack file changed/);
        expect(r.removed).toEqual([]);
    });

    test("a program change affects every stack except the excluded simulated one", () => {
        for (const f of ["components/vllmServe.ts", "infra/config.ts", "Pulumi.yaml", "package-lock.json", "policies/index.ts"]) {
            const r = affectedStacks({ changed: ["README.md", f], stacks });
            expect(r.stacks).toEqual(["four-node", "spark"]);
            expect(r.reasons.spark).toContain(f);
        }
    });

    test("docs, tests and workflows affect no stack", () => {
        const r = affectedStacks({
            changed: ["README.md", "tests/unit/x.test.ts", ".github/workflows/deploy.yml", "tests/testbed/testbed"],
            stacks,
        });
        expect(r.stacks).toEqual([]);
    });

    test("the local stack is previewed only when not excluded", () => {
        expect(affectedStacks({ changed: ["stacks/Pulumi.local.yaml"], stacks }).stacks).toEqual([]);
        expect(affectedStacks({ changed: ["stacks/Pulumi.local.yaml"], stacks, exclude: [] }).stacks).toEqual(["local"]);
    });

    test("a deleted stack file is reported as removed, never as a stack to deploy", () => {
        const r = affectedStacks({ changed: ["stacks/Pulumi.old-lab.yaml", "stacks/Pulumi.spark.yaml"], stacks });
        expect(r.stacks).toEqual(["spark"]);
        expect(r.removed).toEqual(["old-lab"]);
    });

    test("files that merely look like stack files are ignored", () => {
        const r = affectedStacks({ changed: ["stacks/README.md", "stacks/Pulumi.spark.yaml.orig", "other/Pulumi.spark.yaml"], stacks });
        expect(r.stacks).toEqual([]);
    });

    test("an invalid stack name is rejected with its name", () => {
        expect(() => affectedStacks({ changed: [], stacks: ["ok", "bad name"] })).toThrow(/"bad name"/);
    });
});

describe("affected-stacks.js against a real git history", () => {
    let dir: string;
    const git = (...args: string[]) => execFileSync("git", args, { cwd: dir, encoding: "utf8" }).trim();
    const write = (f: string, text: string) => {
        fs.mkdirSync(path.dirname(path.join(dir, f)), { recursive: true });
        fs.writeFileSync(path.join(dir, f), text);
    };
    const script = path.resolve(__dirname, "../../setup/gitops/affected-stacks.js");

    beforeAll(() => {
        dir = fs.mkdtempSync(path.join(os.tmpdir(), "affected-"));
        git("init", "-q", "-b", "main");
        git("config", "user.email", "test@example.invalid");
        git("config", "user.name", "test");
        write("stacks/Pulumi.spark.yaml", "config: {}\n");
        write("stacks/Pulumi.local.yaml", "config: {}\n");
        write("components/a.ts", "export {};\n");
        git("add", "-A");
        git("commit", "-qm", "base");
    });

    afterAll(() => fs.rmSync(dir, { recursive: true, force: true }));

    test("lists stacks from stacks/ and diffs base...head", () => {
        expect(listStacks(path.join(dir, "stacks"))).toEqual(["local", "spark"]);
        const base = git("rev-parse", "HEAD");
        write("stacks/Pulumi.spark.yaml", "config: {a: 1}\n");
        git("commit", "-qam", "change spark");
        const out = execFileSync("node", [script, base, "HEAD"], {
            cwd: dir,
            encoding: "utf8",
            env: { ...process.env, GITOPS_EXCLUDE_STACKS: "local" },
        });
        expect(JSON.parse(out).stacks).toEqual(["spark"]);
        write("components/a.ts", "export const x = 1;\n");
        git("commit", "-qam", "change program");
        const all = execFileSync("node", [script, base, "HEAD"], {
            cwd: dir,
            encoding: "utf8",
            env: { ...process.env, GITOPS_EXCLUDE_STACKS: "" },
        });
        expect(JSON.parse(all).stacks).toEqual(["local", "spark"]);
    });

    test("missing base ref is a usage error", () => {
        expect(() => execFileSync("node", [script], { cwd: dir, stdio: "pipe" })).toThrow(/usage/);
    });
});

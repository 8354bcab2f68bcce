/**
 * docs/security.md's Security table is generated (tests/security/report.js) from the committed results.json, which
 * `npm run docs -- --accept DIR` takes from a full `npm test`'s results: the page must match it, results.json must
 * cover threats.json, and every test it names must exist.
 */
import * as fs from "fs";
import * as path from "path";

// eslint-disable-next-line @typescript-eslint/no-require-imports
const report = require("../security/report.js") as {
    evaluate: (threats: Threat[], seen: { file: string; name: string; status: string }[]) => Row[];
    render: (results: { generated: string; passed: number; rows: Row[] }) => string;
    MARKERS: { start: string; end: string };
    PAGE: string;
};
// eslint-disable-next-line @typescript-eslint/no-require-imports
const docBlock = require("../lib/docBlock.js") as { current: (text: string, m: { start: string; end: string }, page: string) => string };

interface Threat {
    threat: string;
    defense: string;
    tests: { file: string; name: string }[];
}
interface Row extends Omit<Threat, "tests"> {
    tests: { file: string; name: string; assertions: number; status: string }[];
    status: string;
}

const ROOT = path.join(__dirname, "..", "..");
const threats = JSON.parse(fs.readFileSync(path.join(ROOT, "tests/security/threats.json"), "utf8")) as Threat[];
const results = JSON.parse(fs.readFileSync(path.join(ROOT, "tests/security/results.json"), "utf8")) as {
    generated: string;
    passed: number;
    rows: Row[];
};

test("docs/security.md's Security table is exactly what results.json renders", () => {
    const page = fs.readFileSync(path.join(ROOT, report.PAGE), "utf8");
    expect(docBlock.current(page, report.MARKERS, report.PAGE)).toBe(report.render(results));
});

test("results.json covers every threat of threats.json, with the same tests and a result for each", () => {
    expect(results.rows.map((r) => [r.threat, r.defense, r.tests.map((t) => [t.file, t.name])])).toEqual(
        threats.map((t) => [t.threat, t.defense, t.tests.map((x) => [x.file, x.name])]),
    );
    for (const r of results.rows) {
        expect(["passed", "failed", "not run"]).toContain(r.status);
        for (const t of r.tests) expect(["passed", "failed", "not run"]).toContain(t.status);
    }
    expect(results.passed).toBe(results.rows.filter((r) => r.status === "passed").length);
});

test("every named test exists: its file holds a test or describe whose title contains the name's last part", () => {
    for (const t of threats.flatMap((x) => x.tests)) {
        const source = fs.readFileSync(path.join(ROOT, t.file), "utf8");
        const titles = [...source.matchAll(/\b(?:test|it|describe)(?:\.each\([^)]*\))?\(\s*"((?:[^"\\]|\\.)*)"/g)].map((m) => m[1]);
        expect([t.file, t.name, titles.some((x) => t.name.includes(x) || x.includes(t.name))]).toEqual([t.file, t.name, true]);
    }
});

test("evaluation: a threat passes only when every named test ran and passed", () => {
    const one: Threat[] = [
        {
            threat: "t",
            defense: "d",
            tests: [
                { file: "a.ts", name: "x" },
                { file: "b.ts", name: "y" },
            ],
        },
    ];
    const ok = { file: "a.ts", name: "suite x works", status: "passed" };
    expect(report.evaluate(one, [ok, { file: "b.ts", name: "y", status: "passed" }])[0].status).toBe("passed");
    expect(report.evaluate(one, [ok, { file: "b.ts", name: "y", status: "failed" }])[0].status).toBe("failed");
    expect(report.evaluate(one, [ok])[0].status).toBe("not run");
    expect(report.evaluate(one, [ok, { file: "b.ts", name: "y", status: "pending" }])[0].status).toBe("not run");
});

/**
 * The README's measured tables are generated from committed result files that the runs write (bench/report.js,
 * tests/faults/report.js, tests/security/report.js): each block must be exactly what its generator renders now, so
 * a pasted or edited figure, or a results file changed without its table, fails here.
 */
import * as fs from "fs";
import * as path from "path";

type Markers = { start: string; end: string };
// eslint-disable-next-line @typescript-eslint/no-require-imports
const readmeBlock = require("../lib/readmeBlock.js") as { current: (readme: string, m: Markers) => string };
// eslint-disable-next-line @typescript-eslint/no-require-imports
const bench = require("../../bench/report.js") as { blocks: () => [Markers, string][] };
// eslint-disable-next-line @typescript-eslint/no-require-imports
const faults = require("../faults/report.js") as { render: (results: unknown) => string; MARKERS: Markers };

const ROOT = path.join(__dirname, "..", "..");
const readme = fs.readFileSync(path.join(ROOT, "README.md"), "utf8");

describe("README tables match their committed results", () => {
    test.each(bench.blocks().map(([m, text]) => [m.start.split(" ")[1], m, text] as const))(
        "%s is what bench/report.js renders",
        (_name, m, text) => {
            expect(readmeBlock.current(readme, m)).toBe(text);
        },
    );

    test("the Faults table is what tests/faults/report.js renders from tests/faults/results.json", () => {
        const results = JSON.parse(fs.readFileSync(path.join(ROOT, "tests/faults/results.json"), "utf8")) as {
            tests: { total: number; passed: number; failed: number };
            rows: unknown[];
        };
        expect(readmeBlock.current(readme, faults.MARKERS)).toBe(faults.render(results));
        // a run that recorded nothing, or whose counts do not add up, is not a result
        expect(results.rows.length).toBeGreaterThan(0);
        expect(results.tests.passed + results.tests.failed).toBeLessThanOrEqual(results.tests.total);
    });

    test("a changed figure no longer matches", () => {
        const [m, text] = bench.blocks()[0];
        const edited = text.replace(/\*\*(\d)\.(\d\d)\*\*/, (_all, a: string, b: string) => `**${a}.${b === "99" ? "00" : "99"}**`);
        expect(edited).not.toBe(text);
        expect(readmeBlock.current(readme.replace(text, edited), m)).not.toBe(text);
    });

    test("a README without a block's markers is an error naming the block", () => {
        const [m] = bench.blocks()[0];
        expect(() => readmeBlock.current(readme.replace(m.start, ""), m)).toThrow("README.md has no <!-- bench-2hosts:start");
    });
});

/**
 * `unit` (program against Pulumi mocks) and `policy` (policy pack): npm test runs them with -w 2 (two cores, nothing else running).
 * `integration` (simulated hosts, the real engine): only tests/integration/run.sh selects it, with --runInBand.
 * `faults` (simulated hosts, the real engine, one fault per test): only tests/faults/run.sh selects it (npm test runs it).
 * `bench` (simulated hosts, the real engine, the manual procedure): only bench/run.sh selects it.
 * `languages` (the real engine and the Python and YAML language hosts, no hosts): only tests/languages/run.sh selects it.
 */
// Each file transpiled on its own (tests/tsconfig.jest.json sets isolatedModules): no type check per test file,
// which the static stage's tsc --strict does once for the whole tree (tests included). A fresh clone has no jest
// cache, and a type-checked transform costs seconds per file on 2 cores.
const tsJest = ["ts-jest", { tsconfig: "tests/tsconfig.jest.json" }];

/** One jest project: the TypeScript tests under `root`. */
const project = (displayName, root) => ({
    displayName,
    testEnvironment: "node",
    roots: [`<rootDir>/${root}`],
    testMatch: ["**/*.test.ts"],
    transform: { "^.+\\.ts$": tsJest },
    moduleFileExtensions: ["ts", "js", "json"],
});

/** @type {import('jest').Config} */
module.exports = {
    projects: [
        project("unit", "tests/unit"),
        project("policy", "tests/policy"),
        project("integration", "tests/integration"),
        project("faults", "tests/faults"),
        project("bench", "bench"),
        project("languages", "tests/languages"),
    ],
};

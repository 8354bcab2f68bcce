/**
 * `unit` (program against Pulumi mocks) and `policy` (policy pack): run with -w 1 on shared CPUs.
 * `integration` (simulated hosts, direct driver): only tests/integration/run.sh selects it, with --runInBand.
 */
const tsJest = ["ts-jest", { tsconfig: "tsconfig.json", isolatedModules: false }];

/** @type {import('jest').Config} */
module.exports = {
    projects: [
        {
            displayName: "unit",
            testEnvironment: "node",
            roots: ["<rootDir>/tests/unit"],
            testMatch: ["**/*.test.ts"],
            transform: { "^.+\\.ts$": tsJest },
            moduleFileExtensions: ["ts", "js", "json"],
        },
        {
            displayName: "policy",
            testEnvironment: "node",
            roots: ["<rootDir>/tests/policy"],
            testMatch: ["**/*.test.ts"],
            transform: { "^.+\\.ts$": tsJest },
            moduleFileExtensions: ["ts", "js", "json"],
        },
        {
            displayName: "integration",
            testEnvironment: "node",
            roots: ["<rootDir>/tests/integration"],
            testMatch: ["**/*.test.ts"],
            transform: { "^.+\\.ts$": tsJest },
            moduleFileExtensions: ["ts", "js", "json"],
        },
    ],
};

/** Two projects: `unit` (program against Pulumi mocks) and `policy` (policy pack). Run with -w 1 on shared CPUs. */
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
    ],
};

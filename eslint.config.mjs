// Flat config: typescript-eslint recommended + type-aware Pulumi rules (an Output inside a template literal
// renders as a warning string instead of its value).
import pulumi from "@pulumi/eslint-plugin";
import tseslint from "typescript-eslint";

export default tseslint.config(
    {
        ignores: ["node_modules/**", "bin/**", "coverage/**", "policies/node_modules/**", "policies/bin/**", ".state/**", ".testbed/**"],
    },
    ...tseslint.configs.recommended,
    {
        files: ["**/*.ts"],
        languageOptions: {
            parserOptions: {
                projectService: true,
                tsconfigRootDir: import.meta.dirname,
            },
        },
        plugins: { "@pulumi": pulumi },
        rules: {
            "@pulumi/no-output-in-template-literal": "error",
            "@pulumi/no-output-instance-in-template-literal": "error",
            "@typescript-eslint/no-floating-promises": "error",
            "@typescript-eslint/no-unused-vars": ["error", { argsIgnorePattern: "^_", varsIgnorePattern: "^_" }],
        },
    },
    {
        // The product's code stays readable in pieces: small files, short functions (tests are exempt).
        files: ["components/**/*.ts", "infra/**/*.ts", "policies/**/*.ts"],
        rules: {
            "max-lines": ["error", { max: 250, skipBlankLines: true, skipComments: true }],
            "max-lines-per-function": ["error", { max: 60, skipBlankLines: true, skipComments: true }],
        },
    },
    {
        files: ["**/*.js", "**/*.cjs"],
        rules: { "@typescript-eslint/no-require-imports": "off" },
    },
);

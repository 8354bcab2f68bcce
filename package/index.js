/**
 * What the engine runs for this package (package.json's main); the package's code is index.ts and what it imports.
 *
 * Pulumi's plugin runner sets up ts-node for the directory of the program that uses the package (its working
 * directory): that program's tsconfig.json, or none (a Python or YAML program), and type-checks every .ts file it
 * loads under it. Under no tsconfig (no strictNullChecks) the config schema's inferred types fail to check; under a
 * TypeScript user's own settings anything could. So the package's sources are compiled here with the package's own
 * settings (tsconfig.json beside this file), transpiled only: `npm run build` (tsc --strict over the repository)
 * type-checks them, and Pulumi's schema inference reads index.ts with that same tsconfig.json.
 */
"use strict";
const fs = require("fs");
const path = require("path");
const ts = require("typescript");

/** The compiler options of tsconfig.json beside this file; throws naming the file when it does not parse. */
function packageCompilerOptions() {
    const file = path.join(__dirname, "tsconfig.json");
    const read = ts.readConfigFile(file, ts.sys.readFile);
    const parsed = ts.parseJsonConfigFileContent(read.config, ts.sys, __dirname, undefined, file);
    const problems = [read.error, ...parsed.errors].filter((d) => d !== undefined);
    if (problems.length > 0) {
        throw new Error(`${file}: ${problems.map((d) => ts.flattenDiagnosticMessageText(d.messageText, " ")).join("; ")}`);
    }
    return parsed.options;
}

const options = packageCompilerOptions();

// Replaces the runner's handler (not wrapped around it, which would still type-check with the other settings).
require.extensions[".ts"] = (/** @type {NodeModule} */ module, /** @type {string} */ filename) => {
    const out = ts.transpileModule(fs.readFileSync(filename, "utf8"), { compilerOptions: options, fileName: filename });
    /** @type {{ _compile(code: string, filename: string): void }} */ (/** @type {unknown} */ (module))._compile(out.outputText, filename);
};

// by its file name: "./index" is this file
module.exports = require(path.join(__dirname, "index.ts"));

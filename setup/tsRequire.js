// @ts-check
/**
 * Lets plain node require the program's TypeScript modules (npm run docs reads the config schema this way) with
 * the compiler the repository already installs (typescript, a dev dependency): each .ts file is transpiled to
 * CommonJS in memory as it is required, without type checking (the static checks run tsc --strict). No ts-node, no
 * build step, nothing written.
 */
"use strict";
const fs = require("fs");
const ts = require("typescript");

const OPTIONS = { module: ts.ModuleKind.CommonJS, target: ts.ScriptTarget.ES2022, esModuleInterop: true };

function register() {
    if (require.extensions[".ts"]) return;
    require.extensions[".ts"] = (module, filename) => {
        const js = ts.transpileModule(fs.readFileSync(filename, "utf8"), { fileName: filename, compilerOptions: OPTIONS }).outputText;
        /** @type {{ _compile(code: string, filename: string): void }} */ (/** @type {unknown} */ (module))._compile(js, filename);
    };
}

module.exports = { register };

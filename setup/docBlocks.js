// @ts-check
/**
 * Every generated block of the documentation, each from its generator: the measured tables from committed result
 * files (bench/, tests/faults/, tests/security/, tests/results/) and the configuration reference from the config
 * schema, and the component's typed arguments (components/vllmClusterArgs.ts, a whole generated file) from the same
 * schema. `npm run docs` writes them (setup/docs.js); tests/unit/docBlocks.test.ts checks that the pages hold them.
 *
 * The schema is TypeScript: under jest, ts-jest compiles it; under plain node, setup/docs.js registers
 * setup/tsRequire.js first.
 */
"use strict";
const bench = require("../bench/report");
const faults = require("../tests/faults/report");
const security = require("../tests/security/report");
const suite = require("../tests/lib/suite");
const configReference = require("./configReference");
const componentArgs = require("./componentArgs");

/** @returns {import("../tests/lib/docBlock").Block[]} */
function allBlocks() {
    const { clusterFields } = require("../infra/configSchema/cluster");
    const { secretFields } = require("../infra/configSchema/secrets");
    return [
        ...bench.blocks(),
        ...faults.blocks(),
        ...security.blocks(),
        ...suite.blocks(),
        ...configReference.blocks({ cluster: /** @type {any} */ (clusterFields), secrets: /** @type {any} */ (secretFields) }),
        ...componentArgs.files({ cluster: /** @type {any} */ (clusterFields) }),
    ];
}

module.exports = { allBlocks };

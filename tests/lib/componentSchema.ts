/**
 * The package schema Pulumi infers from a TypeScript component package, computed the way `pulumi package add` gets
 * it (the Node SDK's component provider reads the package's TypeScript with the compiler's type checker: the
 * constructor's `args` interface becomes the inputs, the class's public Output fields the outputs, JSDoc the
 * descriptions), but in-process, without the CLI or a language host. Inference errors throw with the SDK's text.
 */
import * as fs from "fs";
import * as path from "path";

export interface PropertySchema {
    type?: string;
    $ref?: string;
    items?: PropertySchema;
    additionalProperties?: PropertySchema;
    /** Not an Input in the generated SDKs: the value arrives as given. */
    plain?: boolean;
    optional?: boolean;
    description?: string;
}

export interface ComponentSchema {
    isComponent?: boolean;
    description?: string;
    inputProperties: Record<string, PropertySchema>;
    requiredInputs?: string[];
    properties: Record<string, PropertySchema>;
    required?: string[];
}

export interface TypeSchema {
    type: string;
    properties?: Record<string, PropertySchema>;
    required?: string[];
    enum?: { name?: string; value: string | number }[];
}

export interface PackageSchema {
    name: string;
    version: string;
    namespace?: string;
    resources: Record<string, ComponentSchema>;
    types?: Record<string, TypeSchema>;
}

interface Analysis {
    components: unknown;
    typeDefinitions: unknown;
    dependencies: unknown;
}
type AnalyzerClass = new (dir: string, name: string, packageJSON: object, componentNames: Set<string>) => { analyze(): Analysis };
type GenerateSchema = (
    name: string,
    version: string,
    description: string | undefined,
    components: unknown,
    typeDefinitions: unknown,
    dependencies: unknown,
    namespace?: string,
) => PackageSchema;

// The SDK's own modules (3.248.0), which its component provider runs; not part of its documented API.
// eslint-disable-next-line @typescript-eslint/no-require-imports
const { Analyzer } = require("@pulumi/pulumi/provider/experimental/analyzer") as { Analyzer: AnalyzerClass };
// eslint-disable-next-line @typescript-eslint/no-require-imports
const { generateSchema } = require("@pulumi/pulumi/provider/experimental/schema") as { generateSchema: GenerateSchema };

/**
 * The schema of the component classes `components` of the package in `dir` (package.json, tsconfig.json and the
 * entry point package.json names). The package's name and scope give the schema's name and namespace, as the
 * Node SDK's plugin runner derives them.
 */
export function inferComponentSchema(dir: string, components: string[]): PackageSchema {
    const pkg = JSON.parse(fs.readFileSync(path.join(dir, "package.json"), "utf8")) as {
        name?: string;
        version?: string;
        description?: string;
    };
    const m = /^(?:@([^/]+)\/)?(.+)$/.exec(pkg.name ?? "");
    if (!m) throw new Error(`${dir}/package.json has no name`);
    const name = m[2].replace(/[^-a-zA-Z0-9_]/g, "-");
    const a = new Analyzer(path.resolve(dir), name, pkg, new Set(components)).analyze();
    return generateSchema(name, pkg.version ?? "0.0.0", pkg.description, a.components, a.typeDefinitions, a.dependencies, m[1]);
}

/**
 * image.build in the graph (Pulumi mocks): the Docker provider's Image on the source node's own engine, never built
 * in a preview, its ID into the source's presence check and the chain; and the bad inputs refused before any
 * resource exists. On the simulated hosts: tests/integration/imageBuild.test.ts.
 */
import * as fs from "fs";
import * as os from "os";
import * as path from "path";
import { ClusterConfig, validateConfig } from "../../infra/config";
import { resolveBuild } from "../../infra/imageBuild";
import { loadStackRaw, runStack } from "./harness";

const ROOT = path.join(__dirname, "..", "..");
/** A context inside the project directory (its .state/, which git ignores), as the config spells it: relative. */
let context: string;
let contextDir: string;

beforeAll(() => {
    fs.mkdirSync(path.join(ROOT, ".state"), { recursive: true });
    contextDir = fs.mkdtempSync(path.join(ROOT, ".state", "vcl-build-unit-"));
    context = path.relative(ROOT, contextDir);
    fs.writeFileSync(path.join(contextDir, "Dockerfile"), "FROM vllm-cluster-testbed:latest\n");
});
afterAll(() => fs.rmSync(contextDir, { recursive: true, force: true }));

function withBuild(build: Record<string, unknown>, image: Record<string, unknown> = {}): ClusterConfig {
    const raw = loadStackRaw("local") as Record<string, Record<string, unknown>>;
    raw.image = { ...raw.image, ...image, build };
    return validateConfig(raw);
}

describe("image.build in the graph", () => {
    it("builds on the source node's engine (its ssh:// provider), not pushed, not in a preview; the chain and the source's check take its ID", async () => {
        const run = await runStack("local", withBuild({ context, args: { FLAVOUR: "derived" } }));
        const build = run.byName.get("image-build")!;
        expect(build.type).toBe("docker:index/image:Image");
        expect(build.provider).toBe("spark-1-docker");
        expect(build.inputs).toMatchObject({
            imageName: "vllm-cluster-testbed:latest",
            skipPush: true,
            buildOnPreview: false,
            build: {
                context: path.relative(process.cwd(), contextDir),
                dockerfile: path.relative(process.cwd(), path.join(contextDir, "Dockerfile")),
                args: { FLAVOUR: "derived" },
                network: "host",
            },
        });
        expect(build.dependsOn).toEqual(expect.arrayContaining(["spark-1-preflight", "spark-2-preflight"]));
        for (const name of ["image-chain", "image-spark-1"]) {
            expect(run.byName.get(name)!.dependsOn).toContain("image-build");
        }
        expect(build.outputs.repoDigest).toMatch(/^sha256:/);
        expect(run.byName.get("image-spark-1")!.inputs.built).toBe(build.outputs.repoDigest);
        expect(run.byName.get("image-chain")!.inputs.built).toBe(build.outputs.repoDigest);
        expect(run.byName.get("image-spark-2")!.inputs.built).toBeUndefined();
    });

    it("is absent without image.build: the graph is as before", async () => {
        const run = await runStack("local");
        expect(run.byName.has("image-build")).toBe(false);
        expect(run.byName.get("image-chain")!.inputs.built).toBeUndefined();
    });
});

describe("image.build refused before any host is touched", () => {
    it("names a build with an image that is not on a host of the cluster", () => {
        expect(() => withBuild({ context }, { source: "registry", sourceNode: undefined })).toThrow(
            /image\.build.*only valid with image\.source=host: the image is built on image\.sourceNode \(source is registry\)/,
        );
    });

    it("names a bad build argument name", () => {
        expect(() => withBuild({ context, args: { "BAD-NAME": "x" } })).toThrow(
            /image\.build\.args.*BAD-NAME.*is not a valid build argument name/,
        );
    });

    it("names a missing context and a missing Dockerfile", () => {
        expect(() => resolveBuild({ context: "no/such/dir", dockerfile: "Dockerfile", args: {} })).toThrow(
            /^image\.build\.context: no\/such\/dir is not a directory/,
        );
        expect(() => resolveBuild({ context, dockerfile: "Other.Dockerfile", args: {} })).toThrow(
            `image.build.dockerfile: Other.Dockerfile is not a file in the context ${context}`,
        );
    });

    it("takes a relative context from the project directory and records it relative to the working directory", () => {
        const r = resolveBuild({ context: "stacks", dockerfile: "Pulumi.local.yaml", args: {} }, path.join(ROOT, "infra"), ROOT);
        expect(r).toEqual({ context: "../stacks", dockerfile: "../stacks/Pulumi.local.yaml", args: {} });
    });

    it("names a context that is not inside the project directory (all of it would go to the host's engine), and a Dockerfile outside the context", () => {
        for (const outside of ["/", os.homedir(), "/etc/..", "..", "../other-project", "stacks/../../x"]) {
            expect(() => withBuild({ context: outside })).toThrow(
                `image.build.context: ${JSON.stringify(outside)} must be a relative path inside the project directory (no absolute path, no .. out of it)`,
            );
        }
        expect(() => withBuild({ context, dockerfile: "../Dockerfile" })).toThrow(
            'image.build.dockerfile: "../Dockerfile" must be a relative path inside the build context (no absolute path, no .. out of it)',
        );
        // a spelling inside that a link leads out of: refused once the link is followed
        const link = path.join(contextDir, "home");
        fs.symlinkSync(os.homedir(), link);
        try {
            expect(() => resolveBuild({ context: path.join(context, "home"), dockerfile: "Dockerfile", args: {} })).toThrow(
                new RegExp(
                    `^image\\.build\\.context: ${path.join(context, "home").replace(/[.]/g, "\\.")} leads outside the project directory`,
                ),
            );
        } finally {
            fs.rmSync(link);
        }
        fs.symlinkSync("/etc/hostname", path.join(contextDir, "Linked.Dockerfile"));
        expect(() => resolveBuild({ context, dockerfile: "Linked.Dockerfile", args: {} })).toThrow(
            `image.build.dockerfile: Linked.Dockerfile leads outside the context ${context} (through a link)`,
        );
    });
});

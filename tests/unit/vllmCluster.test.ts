/**
 * VllmCluster as a team's own program uses it (components/index.ts): arguments checked before anything is registered,
 * the whole graph under the component, each top-level part aliased to where the stack program made it before the
 * component existed (so a stack deployed then upgrades in place), and the argument types a component package accepts
 * (Pulumi's own schema inference, tests/lib/componentSchema.ts).
 */
import * as fs from "fs";
import * as path from "path";
import * as pulumi from "@pulumi/pulumi";
import { VllmCluster, VllmClusterArgs } from "../../components";
import { inferComponentSchema } from "../lib/componentSchema";
import { PROJECT, TEST_TLS, answerLikeHosts, loadStackRaw } from "./harness";

// eslint-disable-next-line @typescript-eslint/no-require-imports
const yaml = require("js-yaml") as { load(s: string): unknown };

const ROOT = path.join(__dirname, "..", "..");

interface Registered {
    type: string;
    name: string;
    parent: string;
    aliases: unknown[];
}

/** Mocks that answer like the hosts (the preflight's facts, the gate, readiness); every registration recorded. */
async function mocks(stack: string): Promise<void> {
    await pulumi.runtime.setMocks(
        {
            newResource: answerLikeHosts,
            call: (a) => a.inputs,
        },
        PROJECT,
        stack,
        false,
    );
}

/**
 * Runs `body` as the stack program (a stack transformation needs the stack resource, hence runInPulumiStack),
 * recording each resource's type, name, parent and aliases as its constructor got them.
 */
async function program(stack: string, body: () => void): Promise<Registered[]> {
    const seen: Registered[] = [];
    await mocks(stack);
    await pulumi.runtime.runInPulumiStack(async () => {
        pulumi.runtime.registerStackTransformation((t) => {
            seen.push({
                type: t.type,
                name: t.name,
                parent: t.opts.parent ? String((t.opts.parent as unknown as { __name?: string }).__name ?? "?") : "",
                aliases: (t.opts.aliases ?? []) as unknown[],
            });
            return undefined;
        });
        body();
        return {};
    });
    await pulumi.runtime.disconnect();
    return seen;
}

/**
 * The local stack's settings, as a team writes them in code (the stack file's keys are the same): the certificate in
 * serve.tls, its private key as the secret Input tlsKey (the testbed's own files exist only while it is up).
 */
function localArgs(): VllmClusterArgs {
    const args = loadStackRaw("local") as unknown as VllmClusterArgs;
    args.serve = { ...args.serve, tls: { cert: TEST_TLS.cert } };
    return { ...args, tlsKey: pulumi.secret(TEST_TLS.key) };
}

const value = <T>(o: pulumi.Output<T>) => new Promise<T>((r) => o.apply(r));

/** The message `make` throws, or "no error". */
function thrown(make: () => unknown): string {
    try {
        make();
        return "no error";
    } catch (e) {
        return (e as Error).message;
    }
}

test("one VllmCluster owns the graph: the top-level parts are its children, each aliased to its place before the component", async () => {
    let c: VllmCluster | undefined;
    const seen = await program("component", () => {
        c = new VllmCluster("vllm", localArgs());
    });
    const [endpoint, served, nodes] = [await value(c!.endpoint), await value(c!.servedModelName), await value(c!.nodes)];
    expect(endpoint).toBe("https://10.231.0.11:8000/v1");
    expect(served).toBe("tiny-qwen2");
    expect(nodes.map((n) => `${n.name} ${n.role}`)).toEqual(["spark-1 head", "spark-2 worker"]);

    const cluster = seen.find((r) => r.type === "vllm-cluster:index:VllmCluster")!;
    expect(cluster).toMatchObject({ name: "vllm", parent: "" });
    const top = seen.filter((r) => r.parent === "vllm").map((r) => r.name);
    expect(top.sort()).toEqual(["image", "monitoring", "ray-head", "ray-worker-spark-2", "roster", "serve", "spark-1", "spark-2"].sort());
    for (const r of seen.filter((x) => x.parent === "vllm")) {
        // the stack program made them at the top level (the engine resolves the alias to that URN)
        expect([r.name, r.aliases]).toEqual([r.name, [{ parent: pulumi.rootStackResource }]]);
    }
    // nothing else at the top level: every resource is the cluster's or below it
    expect(seen.filter((r) => r.parent === "").map((r) => r.name)).toEqual(["vllm"]);
});

test("bad arguments throw naming each key, before the cluster or any child is registered", async () => {
    const args = localArgs() as unknown as { nodes: { fabricIp: string }[]; serve: { port: number } };
    args.nodes[1].fabricIp = args.nodes[0].fabricIp;
    args.serve.port = 70000;
    let error = "";
    const seen = await program("bad-args", () => {
        error = thrown(() => new VllmCluster("vllm", args as unknown as VllmClusterArgs));
    });
    expect(error).toMatch(/^invalid VllmCluster vllm arguments \(\d+ problem\(s\)\)/);
    expect(error).toContain("nodes[1].fabricIp: 10.232.0.11 is used by nodes[0]");
    expect(error).toContain("serve.port:");
    expect(seen).toEqual([]);
});

test("a name that breaks the rule, a setting given as an Output, a secret with nothing to use it: refused, nothing registered", async () => {
    const cases: [string, () => unknown, string][] = [
        ["name", () => new VllmCluster("Bad_Name", localArgs()), 'VllmCluster name "Bad_Name": must match'],
        [
            "Output",
            () =>
                new VllmCluster("vllm", { ...localArgs(), serve: pulumi.output(localArgs().serve) as unknown as VllmClusterArgs["serve"] }),
            "serve: must be plain values, not an Output",
        ],
        [
            "hfToken",
            () => new VllmCluster("vllm", { ...localArgs(), hfToken: pulumi.secret("hf_x") }),
            "hfToken is given, but model.hub is not set",
        ],
        [
            "tlsKey",
            () => new VllmCluster("vllm", { ...localArgs(), serve: { ...localArgs().serve, tls: undefined } }),
            "tlsKey: given, but serve.tls is not set",
        ],
    ];
    const errors: [string, string][] = [];
    const seen = await program("bad-shape", () => {
        for (const [what, make] of cases) errors.push([what, thrown(make)]);
    });
    expect(errors).toEqual(cases.map(([what, , why]) => [what, expect.stringContaining(why)]));
    expect(seen).toEqual([]);
});

test("a second cluster beside \"vllm\" (the stack program's, which keeps every release's names) is refused naming it", async () => {
    let error = "";
    const seen = await program("two", () => {
        new VllmCluster("vllm", localArgs());
        error = thrown(() => new VllmCluster("second", localArgs()));
    });
    expect(error).toContain('VllmCluster second: this program already has the cluster vllm; a cluster named "vllm"');
    expect(seen.filter((r) => r.name === "second")).toEqual([]);
    expect(seen.filter((r) => r.name === "vllm")).toHaveLength(1);
});

/** The local stack's hosts for a second model: backend native, its own ports, a share of the GPU memory. */
/** A second cluster for the same hosts: backend native, its own ports, no monitoring (the first one's covers the hosts). */
function secondArgs(): VllmClusterArgs {
    const { monitoring: _monitoring, ...a } = localArgs();
    return {
        ...a,
        backend: "native",
        serve: { ...a.serve, port: 8100, gpuMemoryUtilization: 0.4 },
        native: { masterPort: 29600 },
    };
}

describe("two clusters on one set of hosts, in one program", () => {
    /** Every docker container registered: its cluster (parent chain's root), name on the host and labels. */
    async function containersOf(
        body: () => void,
    ): Promise<{ seen: Registered[]; containers: { name: string; labels: Record<string, string> }[] }> {
        const containers: { name: string; labels: Record<string, string> }[] = [];
        const seen = await program(`pair-${Math.random().toString(36).slice(2, 8)}`, () => {
            pulumi.runtime.registerStackTransformation((t) => {
                if (t.type === "docker:index/container:Container") {
                    const props = t.props as { name: string; labels: { label: string; value: unknown }[] };
                    const labels: Record<string, string> = {};
                    for (const l of props.labels ?? []) if (typeof l.value === "string") labels[l.label] = l.value;
                    containers.push({ name: props.name, labels });
                }
                return undefined;
            });
            body();
        });
        return { seen, containers };
    }

    test("each names its containers, its state directory and its Pulumi children after itself", async () => {
        const a = localArgs();
        const { seen, containers } = await containersOf(() => {
            new VllmCluster("qwen", { ...a, serve: { ...a.serve, gpuMemoryUtilization: 0.5 } });
            new VllmCluster("llama", secondArgs());
        });
        expect(containers.map((c) => `${c.labels["vllm-cluster.node"]} ${c.name} ${c.labels["vllm-cluster.cluster"]}`).sort()).toEqual(
            [
                "spark-1 qwen-ray-head qwen",
                "spark-2 qwen-ray-worker qwen",
                "spark-1 qwen-serve qwen",
                "spark-1 qwen-prometheus qwen",
                "spark-1 qwen-node-exporter qwen",
                "spark-2 qwen-node-exporter qwen",
                "spark-1 llama-serve llama",
                "spark-2 llama-serve llama",
            ].sort(),
        );
        // no two resources of one type share a name (the engine's URN), and each cluster's top level is its own
        const urns = seen.map((r) => `${r.type}::${r.name}`);
        expect(urns.length).toBe(new Set(urns).size);
        expect(
            seen
                .filter((r) => r.parent === "qwen")
                .map((r) => r.name)
                .sort(),
        ).toEqual(
            [
                "qwen-image",
                "qwen-monitoring",
                "qwen-ray-head",
                "qwen-ray-worker-spark-2",
                "qwen-roster",
                "qwen-serve",
                "qwen-spark-1",
                "qwen-spark-2",
            ].sort(),
        );
        expect(
            seen
                .filter((r) => r.parent === "llama")
                .map((r) => r.name)
                .sort(),
        ).toEqual(["llama-image", "llama-roster", "llama-serve", "llama-spark-1", "llama-spark-2"].sort());
    }, 60_000);

    test("each one's state on the hosts is its own: key files, crash budgets, eviction by its name", async () => {
        const { clusterContainersRemoveStep, clusterStateDir } = await import("../../infra/builders/node");
        expect(clusterStateDir("/var/lib/vllm-cluster", "vllm")).toBe("/var/lib/vllm-cluster");
        expect(clusterStateDir("/var/lib/vllm-cluster", "llama")).toBe("/var/lib/vllm-cluster/clusters/llama");
        // the stack program's cluster clears the whole stack from a host that left it (as every release did) ...
        expect(clusterContainersRemoveStep("spark-2", "prod", "vllm").args).toEqual(["label=vllm-cluster.stack", "stack=prod"]);
        // ... any other only the containers that carry its name
        expect(clusterContainersRemoveStep("spark-2", "prod", "llama").args).toEqual(["label=vllm-cluster.cluster", "stack=llama"]);

        const commands: string[] = [];
        await program(`state-${Math.random().toString(36).slice(2, 8)}`, () => {
            pulumi.runtime.registerStackTransformation((t) => {
                const p = t.props as { create?: unknown; waitScript?: unknown; installScript?: unknown };
                for (const v of [p.create, p.waitScript, p.installScript]) if (typeof v === "string") commands.push(`${t.name}\n${v}`);
                return undefined;
            });
            new VllmCluster("llama", secondArgs());
        });
        const readiness = commands.find((c) => c.startsWith("llama-serve-readiness\n"));
        expect(readiness).toBeDefined();
        expect(readiness).toContain("container=llama-serve");
        expect(readiness).toContain("key-file=/var/lib/vllm-cluster/clusters/llama/spark-1/api-key");
        const preflight = commands.find((c) => c.startsWith("llama-spark-1-preflight\n"));
        expect(preflight).toContain("state-dir=/var/lib/vllm-cluster/clusters/llama");
    }, 60_000);

    test("a port both would listen on, on one host, is refused naming the host, the port and the other cluster; nothing of it registered", async () => {
        let error = "";
        const b = secondArgs();
        const seen = await program(`clash-${Math.random().toString(36).slice(2, 8)}`, () => {
            const a = localArgs();
            new VllmCluster("qwen", { ...a, serve: { ...a.serve, gpuMemoryUtilization: 0.5 } });
            error = thrown(() => new VllmCluster("llama", { ...b, serve: { ...b.serve, port: 8000 } }));
        });
        expect(error).toContain("VllmCluster llama shares hosts with another cluster of this program");
        expect(error).toContain("host 10.231.0.11:22 (node spark-1): port 8000 is also cluster qwen's (node spark-1)");
        expect(seen.filter((r) => r.name.startsWith("llama"))).toEqual([]);
    }, 60_000);

    test("both with monitoring: the node exporter's port is refused on every host, naming the monitoring ports", async () => {
        let error = "";
        await program(`monitoring-${Math.random().toString(36).slice(2, 8)}`, () => {
            const a = localArgs();
            new VllmCluster("qwen", { ...a, serve: { ...a.serve, gpuMemoryUtilization: 0.5 } });
            error = thrown(() => new VllmCluster("llama", { ...secondArgs(), monitoring: a.monitoring }));
        });
        expect(error).toContain("host 10.231.0.11:22 (node spark-1): port 9090, 9100 is also cluster qwen's (node spark-1)");
        expect(error).toContain("host 10.231.0.12:22 (node spark-2): port 9100 is also cluster qwen's (node spark-2)");
        expect(error).toContain("monitoring ports");
    }, 60_000);

    test("more GPU memory than one host holds is refused naming both fractions; unified-memory hosts keep headroom", async () => {
        let error = "";
        let unified = "";
        await program(`memory-${Math.random().toString(36).slice(2, 8)}`, () => {
            const a = localArgs();
            new VllmCluster("qwen", { ...a, serve: { ...a.serve, gpuMemoryUtilization: 0.6 } });
            error = thrown(() => new VllmCluster("llama", secondArgs()));
        });
        expect(error).toContain("serve.gpuMemoryUtilization 0.4 (cluster llama) + 0.6 (cluster qwen) = 1 is above 0.95");
        await program(`memory-u-${Math.random().toString(36).slice(2, 8)}`, () => {
            const a = localArgs();
            const nodes = (a.nodes as { unifiedMemory?: boolean }[]).map((n) => ({ ...n, unifiedMemory: true }));
            // a ceiling given, so the mocked preflight's facts need no MemTotal
            const memoryGuard = { limit: "8g" };
            new VllmCluster("qwen", { ...a, nodes, memoryGuard, serve: { ...a.serve, gpuMemoryUtilization: 0.52 } } as VllmClusterArgs);
            unified = thrown(() => new VllmCluster("llama", { ...secondArgs(), nodes } as VllmClusterArgs));
        });
        expect(unified).toContain("= 0.92 is above 0.9 (a unified-memory host)");
    }, 60_000);
});

describe("the arguments as a component package gets them (Pulumi's schema inference from the TypeScript)", () => {
    // the package's folder as `pulumi package add` reads it: package.json, tsconfig.json, the entry point
    const dir = path.join(ROOT, "package");

    test("package/ is the package vllm-cluster at the repository's version, with no npm packages of its own", () => {
        const pkg = JSON.parse(fs.readFileSync(path.join(dir, "package.json"), "utf8")) as Record<string, unknown>;
        const root = JSON.parse(fs.readFileSync(path.join(ROOT, "package.json"), "utf8")) as Record<string, unknown>;
        // the name gives the type token's package; a dependency would install a second @pulumi/pulumi beside the
        // checkout's, whose runtime the components register with
        expect(pkg).toMatchObject({ name: "vllm-cluster", version: root.version, main: "index.js" });
        expect(pkg.dependencies).toBeUndefined();
        expect(fs.readFileSync(path.join(dir, "PulumiPlugin.yaml"), "utf8")).toMatch(/^runtime: nodejs$/m);
    });

    test("VllmClusterArgs is accepted: nested sections are types with their JSDoc, the secrets are Inputs, the outputs are listed", () => {
        const schema = inferComponentSchema(dir, ["VllmCluster"]);
        expect(schema.name).toBe("vllm-cluster");
        expect(Object.keys(schema.resources)).toEqual(["vllm-cluster:index:VllmCluster"]);
        const c = schema.resources["vllm-cluster:index:VllmCluster"];
        expect(c.isComponent).toBe(true);
        expect(c.requiredInputs?.sort()).toEqual(["image", "model", "nodes", "serve", "ssh"]);
        expect(c.inputProperties.nodes).toMatchObject({ type: "array", items: { $ref: "#/types/vllm-cluster:index:NodeOptions" } });
        expect(c.inputProperties.serve.$ref).toBe("#/types/vllm-cluster:index:ServeOptions");
        // a secret stays an Input in every language; plain settings arrive as given
        expect(c.inputProperties.tlsKey.plain).toBeUndefined();
        expect(c.inputProperties.hfToken.plain).toBeUndefined();
        expect(c.inputProperties.serve.plain).toBe(true);
        expect(c.inputProperties.backend.description).toContain("Rule: one of `ray`, `native`. Default: ray.");
        const node = schema.types?.["vllm-cluster:index:NodeOptions"];
        expect(node?.required?.sort()).toEqual(["fabricIp", "fabricInterface", "gpus", "name", "sshHost", "sshUser"].sort());
        expect(Object.keys(c.properties).sort()).toEqual(
            [
                "apiKey",
                "clusterFingerprint",
                "endpoint",
                "launch",
                "watchdog",
                "modelCommit",
                "monitoring",
                "grafanaAdminPassword",
                "nodes",
                "rayDashboard",
                "servedModelName",
                "status",
            ].sort(),
        );
    }, 120_000);
});

test("the YAML example a user copies declares the local stack's settings; the files it reads come from its config, those of the stack file by default", () => {
    const doc = yaml.load(fs.readFileSync(path.join(ROOT, "examples", "yaml", "Pulumi.yaml"), "utf8")) as {
        config: Record<string, { default: string }>;
        resources: { vllm: { type: string; properties: Record<string, unknown> } };
    };
    expect(doc.resources.vllm.type).toBe("vllm-cluster:index:VllmCluster");
    const { tlsKey, ...settings } = doc.resources.vllm.properties;
    // the private key goes in apart, as the secret Input tlsKey (the docs' way), read from the file config names
    expect(tlsKey).toEqual({ "fn::secret": { "fn::readFile": "${tlsKeyFile}" } });
    const byDefault = JSON.parse(JSON.stringify(settings).replace(/\$\{(\w+)\}/g, (_, k: string) => doc.config[k].default)) as unknown;
    const local = loadStackRaw("local") as { serve: { tls: { certFile: string; keyFile: string } } };
    expect(byDefault).toEqual({ ...local, serve: { ...local.serve, tls: { certFile: local.serve.tls.certFile } } });
    expect(doc.config.tlsKeyFile.default).toBe(local.serve.tls.keyFile);
});

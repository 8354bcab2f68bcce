/**
 * DIRECT DRIVER — NOT PULUMI.
 *
 * Stands in for the Pulumi engine and the docker/command/random provider plugins, which cannot be built on this
 * machine, so the program's behaviour can still be proven on the simulated hosts. It runs the steps of the
 * program's resource graph in the graph's order, and every step uses the program's own code:
 *
 *   preflight (per node)     preflightCommand + parseFacts                       (SparkNode's local.Command)
 *   image (per node)         imagePresenceProvider.create/diff/update directly    (ImagePresence, dynamic provider)
 *                            with imageOrigin + imagePresenceInputs
 *   ray head, ray workers    rayHeadContainerArgs / rayWorkerContainerArgs -> dockerRunArgv over ssh  (docker.Container)
 *   cluster ready            clusterReadyCommand + parseReport                    (ClusterReady's local.Command)
 *   api key                  random key (like RandomPassword, letters+digits) -> apiKeyInstallCommand, key on stdin
 *   serve                    serveContainerArgs -> dockerRunArgv over ssh         (docker.Container)
 *   readiness                serveReadinessCommand(serveReadinessSpec)            (VllmServe's local.Command)
 *
 * Backend native (no Ray head, workers or probe):
 *   serve ranks              nativeServeContainerArgs -> dockerRunArgv over ssh   (VllmNativeServe's docker.Containers)
 *                            rank 0 first; ranks > 0 take its container ID; a rank 0 about to be replaced has the
 *                            other ranks removed first (their replacement is certain: they take its ID)
 *   readiness                serveReadinessCommand on rank 0, triggered by every rank's container ID
 *
 * All values come from planCluster(cfg, stack), the same plan buildCluster wires through Outputs. Like the engine
 * it keeps a state file (what it created, with the inputs), replaces a container whose args changed (delete
 * before replace), re-runs a command whose triggers changed, and, as `pulumi up --refresh` would, notices an
 * image or a container that is gone or not the one it created. `destroy` removes the project's containers by label.
 *
 *   node direct.js up   --stack local [--stack-file F] [--state F] [--key-file F]
 *   node direct.js down --stack local [--stack-file F] [--state F]
 */
import type * as docker from "@pulumi/docker";
import { spawn } from "child_process";
import { createHash, randomInt } from "crypto";
import * as fs from "fs";
import * as path from "path";
import { parseReport, ClusterReport } from "../../components/clusterReady";
import {
    LABEL_PREFIX,
    NodeSpec,
    SshTarget,
    apiKeyInstallCommand,
    apiKeyRemoveCommand,
    clusterReadyCommand,
    joinFingerprint,
    preflightCommand,
    serveReadinessCommand,
    serveReadinessSpec,
    sshArgv,
} from "../../components/commands";
import { nativeServeContainerArgs, rayHeadContainerArgs, rayWorkerContainerArgs, serveContainerArgs } from "../../components/containerArgs";
import { imageOrigin, imagePresenceInputs } from "../../components/imageDistribution";
import { imagePresenceProvider } from "../../components/imageProvider";
import { NodeFacts, parseFacts } from "../../components/sparkNode";
import { serveEndpointUrl } from "../../components/vllmServe";
import { ClusterConfig, validateConfig } from "../../infra/config";
import { ClusterPlan, planCluster } from "../../infra/program";
import { dockerRunArgv } from "./dockerRun";

export const DRIVER_NAME = "direct driver (not Pulumi: stands in for the engine + provider plugins that cannot be built here)";

// js-yaml has no bundled types in this tree's test tooling; typed locally.
// eslint-disable-next-line @typescript-eslint/no-require-imports
const yaml = require("js-yaml") as { load(s: string): unknown };

/** Reads a stack file (`config: vllm-cluster:<key>: ...`) and validates it with the program's validateConfig. */
export function loadStackFile(file: string): ClusterConfig {
    const doc = yaml.load(fs.readFileSync(file, "utf8")) as { config?: Record<string, unknown> };
    const raw: Record<string, unknown> = {};
    for (const [k, v] of Object.entries(doc.config ?? {})) {
        if (k.startsWith("vllm-cluster:")) {
            raw[k.slice("vllm-cluster:".length)] = v;
        }
    }
    return validateConfig(raw);
}

// ------------------------------------------------------------------------------------------------------------
// processes (every one bounded)

export interface RunResult {
    code: number;
    stdout: string;
    stderr: string;
}

/** Runs argv with an optional stdin and a hard time limit; never throws for a non-zero exit. */
export function runArgv(argv: string[], opts: { stdin?: string; timeoutMs: number }): Promise<RunResult> {
    return new Promise((resolve, reject) => {
        const child = spawn(argv[0], argv.slice(1), { stdio: ["pipe", "pipe", "pipe"] });
        let stdout = "";
        let stderr = "";
        let timedOut = false;
        const timer = setTimeout(() => {
            timedOut = true;
            child.kill("SIGKILL");
        }, opts.timeoutMs);
        child.stdout.on("data", (d: Buffer) => (stdout += d.toString()));
        child.stderr.on("data", (d: Buffer) => (stderr += d.toString()));
        child.on("error", (e) => {
            clearTimeout(timer);
            reject(e);
        });
        child.on("close", (code) => {
            clearTimeout(timer);
            if (timedOut) {
                stderr += `\n(killed after ${Math.round(opts.timeoutMs / 1000)}s)`;
            }
            resolve({ code: timedOut ? 124 : (code ?? 1), stdout, stderr });
        });
        child.stdin.end(opts.stdin ?? "");
    });
}

/** Runs a local command line under /bin/sh -c, as the command provider's local.Command does. */
export function runShell(cmd: string, opts: { stdin?: string; timeoutMs: number }): Promise<RunResult> {
    return runArgv(["/bin/sh", "-c", cmd], opts);
}

async function mustRun(what: string, r: Promise<RunResult>): Promise<string> {
    const res = await r;
    if (res.code !== 0) {
        const tail = res.stderr.trim().split("\n").slice(-20).join("\n");
        throw new Error(`${what} failed (exit ${res.code}):\n${tail}`);
    }
    return res.stdout;
}

/** `docker <args>` on a host over ssh (the program's ssh argv builder). */
export function dockerOn(t: SshTarget, args: string[], timeoutMs = 60_000): Promise<RunResult> {
    return runArgv(sshArgv(t, ["docker", ...args]), { timeoutMs });
}

function withTimeout<T>(p: Promise<T>, ms: number, what: string): Promise<T> {
    let timer: NodeJS.Timeout | undefined;
    const t = new Promise<never>((_, reject) => {
        timer = setTimeout(() => reject(new Error(`${what}: no result within ${Math.round(ms / 1000)}s`)), ms);
    });
    return Promise.race([p, t]).finally(() => clearTimeout(timer));
}

// ------------------------------------------------------------------------------------------------------------
// state

interface ContainerState {
    node: string;
    name: string;
    id: string;
    /** sha256 of the docker run argv: the container's inputs. */
    inputs: string;
}

export interface DriverState {
    stack: string;
    facts: Record<string, NodeFacts>;
    /** ImagePresence outputs by node (inputs + imageId), as the engine records a dynamic resource. */
    images: Record<string, Record<string, unknown>>;
    containers: Record<string, ContainerState>;
    probe?: { triggers: string[]; report: ClusterReport };
    /** Generated like RandomPassword (letters and digits); kept in a mode-600 file like a stack's secret. */
    apiKey?: string;
    apiKeyInstalled?: boolean;
    readiness?: { trigger: string };
}

function emptyState(stack: string): DriverState {
    return { stack, facts: {}, images: {}, containers: {} };
}

export interface UpResult {
    endpoint: string;
    apiKey: string;
    fingerprint: string;
    report: ClusterReport;
    containerIds: Record<string, string>;
    imageIds: Record<string, string>;
    /** Seconds per step (steps with unchanged inputs take only their checks). */
    timings: Record<string, number>;
    /** The steps that did work in this run (created, replaced, updated or re-ran), in order. */
    changed: string[];
}

const ALNUM = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";

export class DirectDriver {
    public readonly plan: ClusterPlan;
    private state: DriverState;
    private changed: string[] = [];
    /** Called before a container is (re)created: lets the native path remove the ranks that follow rank 0 first. */
    private onReplace?: (key: string) => Promise<void>;

    constructor(
        public readonly cfg: ClusterConfig,
        public readonly stack: string,
        private readonly stateFile: string,
        private readonly log: (msg: string) => void = (m) => console.error(`[direct driver, not Pulumi] ${m}`),
    ) {
        this.plan = planCluster(cfg, stack);
        this.state = fs.existsSync(stateFile) ? (JSON.parse(fs.readFileSync(stateFile, "utf8")) as DriverState) : emptyState(stack);
    }

    private save(): void {
        fs.mkdirSync(path.dirname(this.stateFile), { recursive: true });
        const tmp = `${this.stateFile}.tmp`;
        fs.writeFileSync(tmp, JSON.stringify(this.state, null, 2), { mode: 0o600 });
        fs.renameSync(tmp, this.stateFile);
    }

    private target(node: string): SshTarget {
        const n = this.plan.nodes.find((x) => x.node.name === node);
        if (!n) {
            throw new Error(`unknown node ${node}`);
        }
        return n.ssh;
    }

    get headName(): string {
        return this.cfg.head.name;
    }

    /**
     * SparkNode's preflight for one node (optionally with other node facts, e.g. a wrong fabric interface), with
     * the host ports the plan gives that node.
     */
    async preflightNode(node: NodeSpec): Promise<NodeFacts> {
        const ports = this.plan.nodes.find((n) => n.node.name === node.name)?.ports ?? [];
        const out = await mustRun(
            `preflight on node ${node.name}`,
            runShell(preflightCommand(this.target(node.name), node, this.plan.stateDir, ports), { timeoutMs: 90_000 }),
        );
        return parseFacts(node.name, out);
    }

    /** Every node's preflight, in parallel (independent resources), run once like a create-only command. */
    async preflight(): Promise<Record<string, NodeFacts>> {
        const missing = this.plan.nodes.filter((n) => !this.state.facts[n.node.name]);
        const facts = await Promise.all(missing.map((n) => this.preflightNode(n.node)));
        for (const f of facts) {
            this.state.facts[f.node] = f;
        }
        this.save();
        return this.state.facts;
    }

    /**
     * ImageDistribution: the source node's ImagePresence first, then every other node's in parallel with the
     * source's ID as expected ID. Each one: create when new, else the provider's diff and, on changes, update.
     */
    async images(): Promise<Record<string, string>> {
        const nodes = this.plan.nodes.map((n) => ({ name: n.node.name, ssh: n.ssh }));
        const origin = imageOrigin(this.plan.image.source, this.plan.image.sourceNode, nodes);
        const source = origin.kind === "host" ? nodes.find((n) => n.name === origin.node) : undefined;
        const one = async (n: { name: string; ssh: SshTarget }, expectedId: string | undefined): Promise<string> => {
            const news = imagePresenceInputs(
                origin,
                n,
                this.plan.image.ref,
                expectedId,
                this.state.facts[n.name]?.arch,
            ) as unknown as Record<string, unknown>;
            news.imageId = undefined;
            const id = `${n.name}/${this.plan.image.ref}`;
            const p = imagePresenceProvider;
            // refresh first (the provider's read), as `pulumi up --refresh` would: a host that lost the image
            // (e.g. a re-created testbed) then shows up in the diff
            const recorded = this.state.images[n.name];
            const olds = recorded ? ((await p.read!(id, recorded)).props as Record<string, unknown>) : undefined;
            let outs: Record<string, unknown>;
            if (!olds) {
                this.log(`image ${this.plan.image.ref} on ${n.name}: create`);
                outs = (await withTimeout(p.create!(news), 900_000, `image on ${n.name}`)).outs as Record<string, unknown>;
            } else {
                const d = await p.diff!(id, olds, news);
                if (!d.changes) {
                    return olds.imageId as string;
                }
                this.log(`image ${this.plan.image.ref} on ${n.name}: update`);
                outs = (await withTimeout(p.update!(id, olds, news), 900_000, `image on ${n.name}`)).outs as Record<string, unknown>;
            }
            this.changed.push(`image-${n.name}`);
            this.state.images[n.name] = outs;
            this.save();
            return outs.imageId as string;
        };
        const ids: Record<string, string> = {};
        if (source) {
            ids[source.name] = await one(source, undefined);
        }
        await Promise.all(
            nodes
                .filter((n) => n !== source)
                .map(async (n) => {
                    ids[n.name] = await one(n, source ? ids[source.name] : undefined);
                }),
        );
        return ids;
    }

    /** The live container `name` on `node`: its ID and whether it runs, or undefined when there is none. */
    async inspectContainer(node: string, name: string): Promise<{ id: string; running: boolean } | undefined> {
        const r = await dockerOn(this.target(node), ["container", "inspect", "--format", "{{.Id}} {{.State.Running}}", name]);
        if (r.code !== 0) {
            if (/no such (container|object)/i.test(r.stderr)) {
                return undefined;
            }
            throw new Error(`docker inspect ${name} on ${node} failed: ${r.stderr.trim()}`);
        }
        const [id, running] = r.stdout.trim().split(" ");
        return { id, running: running === "true" };
    }

    /**
     * docker.Container with deleteBeforeReplace: keep it when its inputs are unchanged and the live container is
     * the one recorded and running; otherwise remove whatever holds the name and run it anew.
     */
    async container(key: string, node: string, args: docker.ContainerArgs): Promise<string> {
        const argv = dockerRunArgv(args);
        const name = argv[argv.indexOf("--name") + 1];
        const inputs = createHash("sha256").update(JSON.stringify(argv)).digest("hex");
        const prev = this.state.containers[key];
        const live = await this.inspectContainer(node, name);
        if (prev && prev.inputs === inputs && live && live.id === prev.id && live.running) {
            return prev.id;
        }
        await this.onReplace?.(key);
        const why = !prev
            ? "create"
            : prev.inputs !== inputs
              ? "replace (inputs changed)"
              : "replace (live container gone, stopped or not ours)";
        this.log(`${key} (${name} on ${node}): ${why}`);
        const t = this.target(node);
        if (live) {
            await mustRun(`removing ${name} on ${node}`, dockerOn(t, ["rm", "--force", name], 90_000));
        }
        const out = await mustRun(`docker run ${name} on ${node}`, runArgv(sshArgv(t, argv), { timeoutMs: 120_000 }));
        const id = out.trim().split("\n").pop() ?? "";
        // mustRun: the container must be running after create.
        await new Promise((r) => setTimeout(r, 1000));
        const now = await this.inspectContainer(node, name);
        if (!now || now.id !== id || !now.running) {
            const logs = await dockerOn(t, ["logs", "--tail", "30", name]);
            throw new Error(`${name} on ${node} is not running after create:\n${(logs.stdout + logs.stderr).trim()}`);
        }
        this.changed.push(key);
        this.state.containers[key] = { node, name, id, inputs };
        this.save();
        return id;
    }

    /** ClusterReady: re-runs when any Ray container ID changed (its triggers). */
    async clusterReady(containerIds: string[], timeoutSeconds?: number): Promise<ClusterReport> {
        if (this.state.probe && JSON.stringify(this.state.probe.triggers) === JSON.stringify(containerIds)) {
            return this.state.probe.report;
        }
        const report = await this.probe(timeoutSeconds);
        this.changed.push("cluster-ready");
        this.state.probe = { triggers: containerIds, report };
        this.save();
        return report;
    }

    /** The cluster-ready probe itself (clusterReadyCommand), bounded by its own timeout. */
    async probe(timeoutSeconds?: number): Promise<ClusterReport> {
        const spec = { ...this.plan.clusterReady, address: this.plan.headAddress };
        if (timeoutSeconds !== undefined) {
            spec.timeoutSeconds = timeoutSeconds;
        }
        const cmd = clusterReadyCommand(this.target(this.headName), spec);
        const out = await mustRun("cluster readiness probe", runShell(cmd, { timeoutMs: (spec.timeoutSeconds + 60) * 1000 }));
        return parseReport(out);
    }

    /** RandomPassword + the key file on the head (VllmServe's / VllmNativeServe's api-key-file command). */
    private async apiKey(step: <T>(name: string, f: () => Promise<T>) => Promise<T>): Promise<string> {
        const head = this.headName;
        if (!this.state.apiKey) {
            this.state.apiKey = Array.from({ length: this.plan.apiKeyLength }, () => ALNUM[randomInt(ALNUM.length)]).join("");
            this.state.apiKeyInstalled = false;
            this.save();
        }
        const apiKey = this.state.apiKey;
        if (!this.state.apiKeyInstalled) {
            await step("api-key", () =>
                mustRun(
                    "api key install",
                    runShell(apiKeyInstallCommand(this.target(head), this.plan.stateDir, head), { stdin: apiKey, timeoutMs: 60_000 }),
                ),
            );
            this.changed.push("api-key");
            this.state.apiKeyInstalled = true;
            this.save();
        }
        return apiKey;
    }

    /** Rank 0's readiness check, re-run when its trigger (one container ID, or every rank's) changed. */
    private async readiness(trigger: string, step: <T>(name: string, f: () => Promise<T>) => Promise<T>): Promise<void> {
        if (this.state.readiness?.trigger === trigger) {
            return;
        }
        const head = this.headName;
        const spec = serveReadinessSpec(head, this.plan.serve.serve, this.plan.stateDir, this.plan.serve.readyTimeoutSeconds);
        await step("readiness", () =>
            mustRun(
                "serve readiness",
                runShell(serveReadinessCommand(this.target(head), spec), { timeoutMs: (spec.timeoutSeconds + 60) * 1000 }),
            ),
        );
        this.changed.push("readiness");
        this.state.readiness = { trigger };
        this.save();
    }

    /**
     * Backend native: api key, rank 0 on the head, ranks > 0 with rank 0's container ID, then rank 0's readiness.
     * The report stands in for ClusterReady's: the join fingerprint and each rank's node and fabric IP.
     */
    private async upNative(
        imageIds: Record<string, string>,
        step: <T>(name: string, f: () => Promise<T>) => Promise<T>,
        timings: Record<string, number>,
    ): Promise<UpResult> {
        const apiKey = await this.apiKey(step);
        const [rank0, ...others] = this.plan.native;
        const keyOf = (nodeRank: number) => `serve-rank-${nodeRank}`;
        const ids: Record<string, string> = {};
        // deleteBeforeReplace with dependents that are replaced too: the engine deletes those first. Here: before rank 0
        // is (re)created, remove the other ranks, so none of them joins the new rank 0 only to be replaced after.
        this.onReplace = async (key) => {
            if (key !== keyOf(0)) {
                return;
            }
            await Promise.all(
                others.map(async (r) => {
                    const live = await this.inspectContainer(r.node.name, "vllm-serve");
                    if (live) {
                        this.log(`${keyOf(r.rank.nodeRank)} (vllm-serve on ${r.node.name}): removed before rank 0 is replaced`);
                        await mustRun(
                            `removing vllm-serve on ${r.node.name}`,
                            dockerOn(this.target(r.node.name), ["rm", "--force", "vllm-serve"], 90_000),
                        );
                    }
                }),
            );
        };
        try {
            ids[keyOf(0)] = await step("serve-rank-0", () =>
                this.container(keyOf(0), rank0.node.name, nativeServeContainerArgs({ ...rank0, imageId: imageIds[rank0.node.name] })),
            );
            await step("serve-ranks", () =>
                Promise.all(
                    others.map(async (r) => {
                        ids[keyOf(r.rank.nodeRank)] = await this.container(
                            keyOf(r.rank.nodeRank),
                            r.node.name,
                            nativeServeContainerArgs({ ...r, imageId: imageIds[r.node.name], rank0ContainerId: ids[keyOf(0)] }),
                        );
                    }),
                ),
            );
        } finally {
            this.onReplace = undefined;
        }
        const rankIds = this.plan.native.map((r) => ids[keyOf(r.rank.nodeRank)]);
        await this.readiness(rankIds.join(","), step);
        const fingerprint = joinFingerprint(rankIds);
        return {
            endpoint: serveEndpointUrl(this.cfg.head.sshHost, this.plan.serve.serve.port),
            apiKey,
            fingerprint,
            report: {
                fingerprint,
                nodes: Object.fromEntries(this.plan.native.map((r) => [r.node.name, r.node.fabricIp])),
                gpus: this.cfg.totalGpus,
            },
            containerIds: ids,
            imageIds,
            timings,
            changed: [...this.changed],
        };
    }

    /** Runs every step in the graph's order; steps whose inputs did not change do nothing. */
    async up(): Promise<UpResult> {
        const timings: Record<string, number> = {};
        this.changed = [];
        const step = async <T>(name: string, f: () => Promise<T>): Promise<T> => {
            const t0 = Date.now();
            const r = await f();
            timings[name] = (Date.now() - t0) / 1000;
            return r;
        };
        this.log(`up: stack ${this.stack}, ${this.plan.nodes.length} node(s), head ${this.headName}`);
        await step("preflight", () => this.preflight());
        const imageIds = await step("image", () => this.images());
        if (this.plan.backend === "native") {
            return this.upNative(imageIds, step, timings);
        }

        const head = this.headName;
        const headId = await step("ray-head", () =>
            this.container("ray-head", head, rayHeadContainerArgs({ ...this.plan.rayHead, imageId: imageIds[head] })),
        );
        const ids: Record<string, string> = { "ray-head": headId };
        await step("ray-workers", () =>
            Promise.all(
                this.plan.workers.map(async (w) => {
                    const key = `ray-worker-${w.node.name}`;
                    ids[key] = await this.container(
                        key,
                        w.node.name,
                        rayWorkerContainerArgs({
                            ...w,
                            imageId: imageIds[w.node.name],
                            headAddress: this.plan.headAddress,
                            headContainerId: headId,
                        }),
                    );
                }),
            ),
        );
        const rayIds = [headId, ...this.plan.workers.map((w) => ids[`ray-worker-${w.node.name}`])];
        const report = await step("cluster-ready", () => this.clusterReady(rayIds));

        const apiKey = await this.apiKey(step);

        ids.serve = await step("serve", () =>
            this.container(
                "serve",
                head,
                serveContainerArgs({
                    ...this.plan.serve,
                    imageId: imageIds[head],
                    rayAddress: this.plan.headAddress,
                    clusterFingerprint: report.fingerprint,
                }),
            ),
        );
        await this.readiness(ids.serve, step);
        const endpoint = serveEndpointUrl(this.cfg.head.sshHost, this.plan.serve.serve.port);
        return {
            endpoint,
            apiKey,
            fingerprint: report.fingerprint,
            report,
            containerIds: ids,
            imageIds,
            timings,
            changed: [...this.changed],
        };
    }

    /** Removes every container of this stack on every node by label (serve ranks, workers, head), then the key file. */
    async destroy(): Promise<void> {
        for (const role of ["serve", "ray-worker", "ray-head"]) {
            await Promise.all(
                this.plan.nodes.map(async ({ node, ssh }) => {
                    const ids = (await projectContainers(ssh, this.stack, role)).map((c) => c.id);
                    if (ids.length > 0) {
                        this.log(`destroy: removing ${role} container(s) on ${node.name}`);
                        await mustRun(`removing ${role} containers on ${node.name}`, dockerOn(ssh, ["rm", "--force", ...ids], 120_000));
                    }
                }),
            );
        }
        const head = this.headName;
        await mustRun("api key removal", runShell(apiKeyRemoveCommand(this.target(head), this.plan.stateDir, head), { timeoutMs: 60_000 }));
        fs.rmSync(this.stateFile, { force: true });
        this.state = emptyState(this.stack);
    }
}

/** Containers on a host carrying this stack's project labels (optionally one role). */
export async function projectContainers(t: SshTarget, stack: string, role?: string): Promise<{ id: string; name: string }[]> {
    const filters = [`label=${LABEL_PREFIX}managed=true`, `label=${LABEL_PREFIX}stack=${stack}`];
    if (role) {
        filters.push(`label=${LABEL_PREFIX}role=${role}`);
    }
    const out = await mustRun(
        `listing project containers on ${t.host}`,
        dockerOn(t, ["ps", "--all", "--format", "{{.ID}} {{.Names}}", ...filters.flatMap((f) => ["--filter", f])]),
    );
    return out
        .trim()
        .split("\n")
        .filter((l) => l !== "")
        .map((l) => {
            const [id, name] = l.split(" ");
            return { id, name };
        });
}

// ------------------------------------------------------------------------------------------------------------
// command line

async function main(argv: string[]): Promise<number> {
    const cmd = argv[0];
    const opt = (name: string, dflt: string): string => {
        const i = argv.indexOf(`--${name}`);
        return i >= 0 && argv[i + 1] !== undefined ? argv[i + 1] : dflt;
    };
    // The repository root: the nearest directory up from here (source or compiled copy) holding stacks/.
    let root = __dirname;
    while (!fs.existsSync(path.join(root, "stacks", "Pulumi.local.yaml")) && path.dirname(root) !== root) {
        root = path.dirname(root);
    }
    const stack = opt("stack", "local");
    const stackFile = opt("stack-file", path.join(root, "stacks", `Pulumi.${stack}.yaml`));
    const stateFile = opt("state", path.join(root, ".state", "direct", `${stack}.json`));
    if (cmd !== "up" && cmd !== "down") {
        console.error("usage: direct.js up|down [--stack local] [--stack-file F] [--state F] [--key-file F]");
        return 64;
    }
    console.error(`[${DRIVER_NAME}] ${cmd} stack ${stack} (${stackFile})`);
    const driver = new DirectDriver(loadStackFile(stackFile), stack, stateFile);
    const t0 = Date.now();
    if (cmd === "down") {
        await driver.destroy();
        console.error(`[direct driver, not Pulumi] destroyed stack ${stack} containers in ${((Date.now() - t0) / 1000).toFixed(1)}s`);
        return 0;
    }
    const r = await driver.up();
    const keyFile = opt("key-file", "");
    if (keyFile !== "") {
        fs.writeFileSync(keyFile, r.apiKey, { mode: 0o600 });
    }
    const took = ((Date.now() - t0) / 1000).toFixed(1);
    console.log(
        JSON.stringify(
            {
                driver: "direct (not Pulumi)",
                endpoint: r.endpoint,
                servedModelName: driver.cfg.model.servedName,
                clusterFingerprint: r.fingerprint,
                nodes: r.report.nodes,
                upSeconds: Number(took),
                changed: r.changed,
                timings: r.timings,
            },
            null,
            2,
        ),
    );
    return 0;
}

if (require.main === module) {
    main(process.argv.slice(2)).then(
        (code) => process.exit(code),
        (e: Error) => {
            console.error(`[direct driver, not Pulumi] FAILED: ${e.message}`);
            process.exit(1);
        },
    );
}

/**
 * Upgrading a stack in place across the move into one VllmCluster component: the `local` stack deployed on the
 * simulated hosts by the release before the component (its program from git, PREVIOUS_RELEASE), then the checkout's
 * program on the same state. Every resource moved under the component, and its aliases must keep each one: the up
 * creates only the component itself (which holds nothing on a host) and replaces only the serve container, whose
 * start now carries the serve watchdog (serve.watchdog); the Ray containers on the hosts are the ones the earlier
 * release started, and the next preview is empty. Run by tests/integration/run.sh (others).
 */
import { LABEL } from "../../infra/contract";
import { Project, changed, destroy, expectOk, openProjectAt, preview, removeProject, up, upgradeProgram } from "./engine";
import { Hosts, stackConfig } from "./hosts";
import { chat, mergeTimings } from "./support";

/** The last commit of the program before VllmCluster: the stack program made the components at the top level. */
const PREVIOUS_RELEASE = "9d36b3fbf2c067609f5991fa9f3b176ecabd3559";
const STACK = "local";
const TIMINGS_FILE = process.env.VCL_INTEGRATION_TIMINGS;
const timings: Record<string, number> = {};
const NODES = ["spark-1", "spark-2"];

let p: Project;
let hosts: Hosts;
let endpoint = "";
let apiKey = "";
/** The stack's containers on each host as the earlier release left them: "name id". */
let before: string[] = [];
/** How many resources the earlier release's state holds. */
let resourcesBefore = 0;

/** Every resource of the stack's state (components too) as "type name". */
async function stateEntries(): Promise<string[]> {
    const d = await p.stack.exportStack();
    return ((d.deployment.resources ?? []) as { type: string; urn: string }[]).map((r) => `${r.type} ${r.urn.split("::").pop()}`);
}

async function containers(): Promise<string[]> {
    const out: string[] = [];
    for (const n of NODES) {
        const r = await hosts.docker(n, [
            "ps",
            "--all",
            "--no-trunc",
            "--filter",
            `label=${LABEL.stack}=${STACK}`,
            "--format",
            "{{.Names}} {{.ID}}",
        ]);
        out.push(
            ...r.stdout
                .split("\n")
                .filter(Boolean)
                .map((l) => `${n} ${l}`),
        );
    }
    return out.sort();
}

beforeAll(async () => {
    p = await openProjectAt(PREVIOUS_RELEASE, STACK, "vcl-upgrade-");
    hosts = new Hosts(stackConfig(p.stackFile));
    // Start from no project container on either host (the other stacks use the same container names).
    for (const n of NODES) await hosts.removeProjectContainers(n);
}, 600_000);

afterAll(async () => {
    if (TIMINGS_FILE) mergeTimings(TIMINGS_FILE, timings);
    if (p) {
        if (process.env.VCL_INTEGRATION_KEEP !== "1") await destroy(p);
        removeProject(p);
    }
}, 600_000);

test("the release before VllmCluster deploys the local stack, its components at the top level, and serves", async () => {
    const r = expectOk(await up(p));
    timings["upgrade: previous release up"] = r.seconds;
    endpoint = String(r.outputs.endpoint);
    apiKey = String(r.outputs.apiKey);
    expect((await chat(endpoint, hosts.cfg.model.servedName, apiKey)).status).toBe(200);
    const state = await stateEntries();
    expect(state.filter((s) => s.startsWith("vllm-cluster:index:VllmCluster "))).toEqual([]);
    expect(state).toContain("vllm-cluster:index:RayHead ray-head");
    resourcesBefore = state.length;
    before = await containers();
    expect(before.map((c) => c.split(" ").slice(0, 2).join(" "))).toEqual([
        "spark-1 vllm-ray-head",
        "spark-1 vllm-serve",
        "spark-2 vllm-ray-worker",
    ]);
}, 1_200_000);

test("the checkout's program on that state: up creates only the VllmCluster and replaces only serve (its start now carries the watchdog; the readiness check waits for the new server; the preflights run again); the Ray containers are kept; the next preview is empty", async () => {
    expect(before).not.toEqual([]);
    upgradeProgram(p);
    const r = expectOk(await up(p));
    timings["upgrade: up with the component"] = r.seconds;
    // the preflights run again too: they now refuse a port that another stack's or cluster's container claims
    expect(changed(r)).toEqual([
        "create vllm",
        "replace serve-container",
        "update serve-readiness",
        "update spark-1-preflight",
        "update spark-2-preflight",
    ]);
    const ray = (cs: string[]) => cs.filter((c) => !c.includes(" vllm-serve "));
    const after = await containers();
    expect(ray(after)).toEqual(ray(before));
    expect(after.map((c) => c.split(" ").slice(0, 2).join(" "))).toEqual(before.map((c) => c.split(" ").slice(0, 2).join(" ")));
    expect(after.find((c) => c.includes(" vllm-serve "))).not.toBe(before.find((c) => c.includes(" vllm-serve ")));
    // the same resources, plus the component, and none left under its old URN
    const state = await stateEntries();
    expect(state.filter((s) => s.startsWith("vllm-cluster:index:VllmCluster "))).toEqual(["vllm-cluster:index:VllmCluster vllm"]);
    expect(state.length).toBe(resourcesBefore + 1);
    // the same key, the same endpoint, still answering
    expect([String(r.outputs.endpoint), String(r.outputs.apiKey) === apiKey]).toEqual([endpoint, true]);
    expect((await chat(endpoint, hosts.cfg.model.servedName, apiKey)).status).toBe(200);
    const next = expectOk(await preview(p, { expectNoChanges: true }));
    expect(changed(next)).toEqual([]);
}, 1_200_000);

/**
 * Two clusters on one set of hosts: the `local` stack (backend ray, the stack program's cluster "vllm") and a second
 * stack whose cluster is named `second` (backend native, its own ports), both on spark-1 and spark-2 at once, each
 * serving its own model name with its own key; then the second destroyed while the first goes on serving, untouched.
 * Run by tests/integration/run.sh (part `apart`: npm run test:apart), not by npm test.
 */
import * as path from "path";
import { apiKeyHostPath, clusterStateDir } from "../../infra/builders/node";
import { CONTAINER, LABEL, containerNames } from "../../infra/contract";
import { Project, changed, destroy, editConfig, expectOk, openProject, preview, removeProject, up, withoutMonitoring } from "./engine";
import { Hosts, stackConfig } from "./hosts";
import { chat, completionTokens, mergeTimings } from "./support";

const TIMINGS_FILE = process.env.VCL_INTEGRATION_TIMINGS;
const timings: Record<string, number> = {};
const NODES = ["spark-1", "spark-2"];
const SECOND = "second";

let first: Project;
let second: Project;
let hosts: Hosts;
const serving = { first: { endpoint: "", apiKey: "" }, second: { endpoint: "", apiKey: "" } };

/** Every project container on each host as "node name cluster-label stack-label id". */
async function containers(): Promise<string[]> {
    const out: string[] = [];
    for (const n of NODES) {
        const r = await hosts.docker(n, [
            "ps",
            "--all",
            "--no-trunc",
            "--filter",
            `label=${LABEL.managed}=true`,
            "--format",
            `{{.Names}} {{.Label "${LABEL.cluster}"}} {{.Label "${LABEL.stack}"}} {{.ID}}`,
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

const withoutIds = (cs: string[]) => cs.map((c) => c.split(" ").slice(0, 4).join(" "));

beforeAll(async () => {
    first = await openProject("local", "vcl-it-two-a-");
    withoutMonitoring(first);
    hosts = new Hosts(stackConfig(first.stackFile));
    // The second stack: the native backend's settings with the first one's model (on every host already), its own
    // cluster name, serve port and rendezvous port; everything else as the testbed's stacks have it.
    second = await openProject(SECOND, "vcl-it-two-b-", path.join(__dirname, "..", "..", "stacks", "Pulumi.local-native.yaml"));
    editConfig(second, (c) => {
        const model = hosts.cfg.model;
        c.clusterName = SECOND;
        c.model = { hostPath: model.hostPath, containerPath: model.containerPath, servedName: `${model.servedName}-second` };
        (c.serve as Record<string, unknown>).port = 8100;
        (c.serve as Record<string, unknown>).gpuMemoryUtilization = 0.4;
        c.native = { masterPort: 29600 };
    });
    for (const n of NODES) await hosts.removeProjectContainers(n);
}, 900_000);

afterAll(async () => {
    if (TIMINGS_FILE) mergeTimings(TIMINGS_FILE, timings);
    for (const p of [second, first]) {
        if (!p) continue;
        if (process.env.VCL_INTEGRATION_KEEP !== "1") await destroy(p);
        removeProject(p);
    }
}, 1_200_000);

test("both serve at once from the same two hosts: each cluster's containers, state and key are its own", async () => {
    const a = expectOk(await up(first));
    timings["two clusters: first up"] = a.seconds;
    serving.first = { endpoint: String(a.outputs.endpoint), apiKey: String(a.outputs.apiKey) };
    const b = expectOk(await up(second));
    timings["two clusters: second up, beside the first"] = b.seconds;
    serving.second = { endpoint: String(b.outputs.endpoint), apiKey: String(b.outputs.apiKey) };
    expect(serving.first.endpoint).toBe("https://10.231.0.11:8000/v1");
    expect(serving.second.endpoint).toBe("https://10.231.0.11:8100/v1");
    // the second up created its own resources and touched nothing of the first
    expect(changed(b).every((c) => c.startsWith("create "))).toBe(true);

    const names = containerNames(SECOND);
    expect(withoutIds(await containers())).toEqual(
        [
            `spark-1 ${CONTAINER.rayHead}  local`,
            `spark-1 ${CONTAINER.serve}  local`,
            `spark-1 ${names.serve} ${SECOND} ${SECOND}`,
            `spark-2 ${CONTAINER.rayWorker}  local`,
            `spark-2 ${names.serve} ${SECOND} ${SECOND}`,
        ].sort(),
    );
    // each cluster's API key in its own state directory on the head
    const stateDir = hosts.cfg.stateDir;
    expect((await hosts.must("spark-1", ["cat", apiKeyHostPath(stateDir, "spark-1")])).trim()).toBe(serving.first.apiKey);
    expect((await hosts.must("spark-1", ["cat", apiKeyHostPath(clusterStateDir(stateDir, SECOND), "spark-1")])).trim()).toBe(
        serving.second.apiKey,
    );
    expect(serving.first.apiKey).not.toBe(serving.second.apiKey);

    const model = hosts.cfg.model.servedName;
    const [okA, okB] = [
        await chat(serving.first.endpoint, model, serving.first.apiKey),
        await chat(serving.second.endpoint, `${model}-second`, serving.second.apiKey),
    ];
    expect([okA.status, okB.status]).toEqual([200, 200]);
    expect(completionTokens(okA)).toBeGreaterThan(0);
    expect(completionTokens(okB)).toBeGreaterThan(0);
    // one cluster's key opens nothing of the other's
    expect((await chat(serving.second.endpoint, `${model}-second`, serving.first.apiKey)).status).toBe(401);
    expect((await chat(serving.first.endpoint, model, serving.second.apiKey)).status).toBe(401);
}, 1_800_000);

test("with both deployed, neither stack's preview has a change (the other's containers, ports and files are not its own)", async () => {
    expect(changed(expectOk(await preview(first, { expectNoChanges: true, refresh: true })))).toEqual([]);
    expect(changed(expectOk(await preview(second, { expectNoChanges: true, refresh: true })))).toEqual([]);
}, 900_000);

test("a third stack on the same hosts whose serve port is the first's: its up fails at preflight naming the first's container, and no container of it exists", async () => {
    const third = await openProject("third", "vcl-it-two-c-", path.join(__dirname, "..", "..", "stacks", "Pulumi.local-native.yaml"));
    try {
        editConfig(third, (c) => {
            const model = hosts.cfg.model;
            c.clusterName = "third";
            c.model = { hostPath: model.hostPath, containerPath: model.containerPath, servedName: `${model.servedName}-third` };
            (c.serve as Record<string, unknown>).port = hosts.cfg.serve.port;
            c.native = { masterPort: 29700 };
        });
        const before = await containers();
        const r = await up(third);
        expect(r.ok).toBe(false);
        const said = r.events
            .filter((e) => e.diagnosticEvent?.severity === "error")
            .map((e) => e.diagnosticEvent!.message)
            .join("\n");
        expect(said).toContain(
            `port ${hosts.cfg.serve.port} is claimed on this host by container ${CONTAINER.serve} of stack local: two clusters on one host need distinct ports`,
        );
        expect(await containers()).toEqual(before);
    } finally {
        await destroy(third);
        removeProject(third);
    }
}, 900_000);

test("destroying the second leaves the first serving, every container of it the same one", async () => {
    const before = (await containers()).filter((c) => c.split(" ")[3] === "local");
    const d = expectOk(await destroy(second));
    timings["two clusters: second destroyed"] = d.seconds;
    expect(await containers()).toEqual(before);
    // its key file went with it
    const keyFile = apiKeyHostPath(clusterStateDir(hosts.cfg.stateDir, SECOND), "spark-1");
    expect((await hosts.must("spark-1", ["sh", "-c", `test -e ${keyFile} && echo present || echo gone`])).trim()).toBe("gone");
    expect((await chat(serving.first.endpoint, hosts.cfg.model.servedName, serving.first.apiKey)).status).toBe(200);
    expect(changed(expectOk(await preview(first, { expectNoChanges: true, refresh: true })))).toEqual([]);
}, 1_200_000);

/**
 * model.hub: its config, the download command (no token in argv or environment), the provider's check against the
 * Hub STAND-IN (tests/testbed/hub_standin.py, run here on loopback: the errors a wrong revision, a missing repo and a
 * refused token give, before any host is touched), the hfToken rules, and the graph. On the simulated hosts, with
 * the real client: tests/integration/hubModel.test.ts.
 */
import * as pulumi from "@pulumi/pulumi";
import * as path from "path";
import { hubDownloadCommand, hubEndpoint } from "../../infra/builders/hub";
import { ClusterConfig, NO_SECRET_CONFIG, loadHfToken, validateConfig } from "../../infra/config";
import { buildCluster } from "../../infra/program";
import { hubModelProvider } from "../../infra/providers/hubModel";
import { startHubStandin } from "../lib/hubStandin";
import { loadStackRaw, runMocked, testTls } from "./harness";

const ROOT = path.join(__dirname, "..", "..");
const REPO = "vllm-cluster-test/tiny-qwen2";
const TOKEN = "hf_unit_token_0123456789";

function withHub(hub: Record<string, unknown>, model: Record<string, unknown> = {}): ClusterConfig {
    const raw = loadStackRaw("local") as Record<string, Record<string, unknown>>;
    raw.model = { ...raw.model, ...model, hub };
    return validateConfig(raw);
}

describe("model.hub config", () => {
    it("downloads on the image's source node unless model.source names another", () => {
        const cfg = withHub({ repo: REPO, revision: "a".repeat(40) });
        expect(cfg.model.source).toBe("spark-1");
        expect(cfg.model.hub).toEqual({ repo: REPO, revision: "a".repeat(40) });
        expect(withHub({ repo: REPO, revision: "main" }, { source: "spark-2" }).model.source).toBe("spark-2");
    });

    it("names a malformed repo, revision or endpoint", () => {
        expect(() => withHub({ repo: "no-owner", revision: "main" })).toThrow(
            /model\.hub\.repo: "no-owner" is not a valid Hub repository \(owner\/name\)/,
        );
        expect(() => withHub({ repo: REPO, revision: "-x" })).toThrow(/model\.hub\.revision: "-x" is not a valid revision/);
        expect(() => withHub({ repo: REPO, revision: "main", endpoint: "ftp://hub" })).toThrow(
            /model\.hub\.endpoint: "ftp:\/\/hub" is not a valid Hub endpoint URL/,
        );
        expect(() => withHub({ repo: REPO })).toThrow(/model\.hub\.revision: is required/);
    });

    it("takes the endpoint from the config, else the operator's HF_ENDPOINT, else the Hub's own", () => {
        expect(hubEndpoint("http://10.0.0.1:8080/", {})).toBe("http://10.0.0.1:8080");
        expect(hubEndpoint(undefined, { HF_ENDPOINT: "http://mirror:1" })).toBe("http://mirror:1");
        expect(hubEndpoint(undefined, {})).toMatch(/^https:\/\//);
    });
});

describe("hfToken", () => {
    afterEach(() => pulumi.runtime.setAllConfig({}, []));
    const cfg = () => withHub({ repo: REPO, revision: "main" });

    it("is refused in plain text, and when nothing uses it", () => {
        pulumi.runtime.setAllConfig({ "vllm-cluster:hfToken": TOKEN }, []);
        expect(() => loadHfToken(cfg())).toThrow("hfToken: set it as a secret (pulumi config set --secret hfToken)");
        pulumi.runtime.setAllConfig({ "vllm-cluster:hfToken": TOKEN }, ["vllm-cluster:hfToken"]);
        expect(() => loadHfToken(validateConfig(loadStackRaw("local")))).toThrow("hfToken: set, but model.hub is not");
    });

    it("is a secret Output when set as one, and absent when unset", async () => {
        pulumi.runtime.setAllConfig({ "vllm-cluster:hfToken": TOKEN }, ["vllm-cluster:hfToken"]);
        const t = loadHfToken(cfg())!;
        expect(await pulumi.isSecret(t)).toBe(true);
        pulumi.runtime.setAllConfig({}, []);
        expect(loadHfToken(cfg())).toBeUndefined();
    });
});

describe("the download command", () => {
    const target = { user: "aurora", host: "10.1.230.180", port: 22, privateKeyPath: "~/.ssh/id", knownHostsFile: "~/.ssh/kh" };
    const cmd = hubDownloadCommand({
        target,
        repo: REPO,
        commit: "c".repeat(40),
        endpoint: "http://hub:1",
        hostPath: "/m/q",
        image: "sha256:1",
        script: "print(1)",
    });

    it("runs the script in the image as the login user, stdin attached for the token, online for this run only", () => {
        expect(cmd).toContain('docker run --rm -i --user "$(id -u):$(id -g)"');
        expect(cmd).toContain("HF_HUB_OFFLINE=0");
        expect(cmd).toContain("HF_ENDPOINT=http://hub:1");
        expect(cmd).toContain("docker rm -f vllm-cluster-hub-download");
        expect(cmd).not.toMatch(/TOKEN|HF_TOKEN|authorization/i);
    });
});

describe("the provider's check, against the Hub stand-in on loopback", () => {
    let stop = () => {};
    let url = "";
    let commit = "";

    beforeAll(async () => {
        const ready = await startHubStandin([
            "--port",
            "0",
            "--token",
            TOKEN,
            "--repo",
            `${REPO}=${path.join(ROOT, "tests", "testbed", "model")}`,
        ]);
        stop = ready.stop;
        url = ready.url;
        commit = ready.commits[REPO];
    });
    afterAll(() => stop());

    const check = (fields: Record<string, unknown>) =>
        hubModelProvider.check!(
            {},
            { node: "spark-1", repo: REPO, revision: commit, endpoint: url, token: TOKEN, hostPath: "/m", ...fields },
        );

    it("resolves a branch to its commit, and a commit to itself", async () => {
        expect(commit).toMatch(/^[0-9a-f]{40}$/);
        expect((await check({ revision: "main" })).inputs.commit).toBe(commit);
        expect((await check({})).failures ?? []).toEqual([]);
    });

    it("names a wrong revision, a missing repo, a refused or missing token, an unreachable Hub", async () => {
        expect((await check({ revision: "f".repeat(40) })).failures).toEqual([
            { property: "revision", reason: `model.hub.revision: ${"f".repeat(40)} is not a revision of ${REPO}` },
        ]);
        expect((await check({ repo: "vllm-cluster-test/none" })).failures![0].reason).toBe(
            "model.hub.repo: no repo vllm-cluster-test/none on the Hub",
        );
        expect((await check({ token: "hf_wrong" })).failures).toEqual([
            { property: "token", reason: `hfToken: the Hub refused the token for ${REPO} (401: invalid or expired)` },
        ]);
        expect((await check({ token: undefined })).failures![0].reason).toMatch(
            /needs a token: set the secret hfToken|or it is private: set the secret hfToken/,
        );
        expect((await check({ endpoint: "http://127.0.0.1:9" })).failures![0].reason).toMatch(
            /^model\.hub: cannot reach the Hub at http:\/\/127\.0\.0\.1:9/,
        );
    });
});

describe("the graph with model.hub", () => {
    it("downloads on spark-1 in its image after the preflights, with the token as a secret; the chain copies that commit", async () => {
        const cfg = withHub({ repo: REPO, revision: "main", endpoint: "http://hub:1" });
        const run = await runMocked(() => buildCluster(cfg, "local", NO_SECRET_CONFIG, testTls(cfg), pulumi.secret(TOKEN)), "local");
        const hub = run.byName.get("model-hub")!;
        expect(hub.inputs).toMatchObject({
            node: "spark-1",
            repo: REPO,
            revision: "main",
            endpoint: "http://hub:1",
            hostPath: cfg.model.hostPath,
        });
        expect(hub.inputs.image).toBe(run.byName.get("image-spark-1")!.outputs.imageId);
        expect(JSON.stringify(hub.inputs.token)).toContain(pulumi.runtime.specialSecretSig);
        expect(hub.dependsOn).toEqual(expect.arrayContaining(["spark-1-preflight", "spark-2-preflight"]));
        const chain = run.byName.get("model-chain")!;
        expect(chain.dependsOn).toContain("model-hub");
        expect(chain.inputs.hubCommit).toBe(hub.outputs.commit);
        expect(hub.outputs.commit).toMatch(/^[0-9a-f]{40}$/);
    });
});

/**
 * A value set with `pulumi config set --secret` (an HF token in nodes[].env, a value in serve.extraArgs) stays a
 * secret: the containers' inputs that carry it are secret outputs, so the state encrypts them and every diff shows
 * [secret]. Pulumi marks the whole top-level key secret, never a leaf, so every value of that kind is kept secret.
 */
import * as pulumi from "@pulumi/pulumi";
import { specialSecretSig, specialSigKey } from "@pulumi/pulumi/runtime/rpc";
import { NO_SECRET_CONFIG, loadConfig, loadSecretConfig } from "../../infra/config";
import { buildCluster } from "../../infra/program";
import { loadStack, loadStackRaw, runMocked, testTls } from "./harness";

/** What the mocks see of a secret input: Pulumi's secret signature around the value. */
const isSecretInput = (v: unknown) =>
    typeof v === "object" && v !== null && (v as Record<string, unknown>)[specialSigKey] === specialSecretSig;

describe("secret config stays secret", () => {
    test("nodes with a secret: every container env of a node with env values is a secret input, the rest stay plain", async () => {
        const cfg = loadStack("local");
        cfg.nodes[1].env = { ...cfg.nodes[1].env, HF_TOKEN: "hf_from_secret_config" };
        cfg.nodes[0].env = {};
        const run = await runMocked(() => buildCluster(cfg, "local", { nodeEnv: true, serveArgs: false }, testTls(cfg)), "local");
        expect(isSecretInput(run.byName.get("ray-worker-spark-2-container")!.inputs.envs)).toBe(true);
        // spark-1 has no env values of its own: nothing secret to keep, its diffs stay readable
        expect(isSecretInput(run.byName.get("ray-head-container")!.inputs.envs)).toBe(false);
        expect(isSecretInput(run.byName.get("serve-container")!.inputs.command)).toBe(false);
    });

    test("serve with a secret: the serve command (which carries extraArgs) is a secret input; Ray's commands are not", async () => {
        const cfg = loadStack("local");
        cfg.serve.extraArgs = [...cfg.serve.extraArgs, "--hf-token", "hf_from_secret_config"];
        const run = await runMocked(() => buildCluster(cfg, "local", { nodeEnv: false, serveArgs: true }, testTls(cfg)), "local");
        expect(isSecretInput(run.byName.get("serve-container")!.inputs.command)).toBe(true);
        expect(isSecretInput(run.byName.get("ray-head-container")!.inputs.command)).toBe(false);
    });

    test("no secret config: nothing is made secret (the default)", async () => {
        const cfg = loadStack("local");
        const run = await runMocked(() => buildCluster(cfg, "local", NO_SECRET_CONFIG, testTls(cfg)), "local");
        for (const r of run.resources.filter((x) => x.type === "docker:index/container:Container")) {
            expect([r.name, isSecretInput(r.inputs.envs), isSecretInput(r.inputs.command)]).toEqual([r.name, false, false]);
        }
    });

    test("which sections hold a secret is read from the engine's list of secret keys", () => {
        pulumi.runtime.setAllConfig({ "vllm-cluster:nodes": "[]", "vllm-cluster:serve": "{}" }, ["vllm-cluster:nodes"]);
        expect(loadSecretConfig()).toEqual({ nodeEnv: true, serveArgs: false });
        pulumi.runtime.setAllConfig({ "vllm-cluster:nodes": "[]", "vllm-cluster:serve": "{}" }, ["vllm-cluster:serve"]);
        expect(loadSecretConfig()).toEqual({ nodeEnv: false, serveArgs: true });
        pulumi.runtime.setAllConfig({}, []);
        expect(loadSecretConfig()).toEqual(NO_SECRET_CONFIG);
    });

    test("a key whose values land in clear, set with --secret (a build argument of image), is refused naming it; nodes and serve may hold one", () => {
        const raw = loadStackRaw("local");
        raw.image = {
            ...(raw.image as object),
            build: { context: "stacks/images/qwen35-gb10", args: { PIP_TOKEN: "from secret config" } },
        };
        const all = Object.fromEntries(
            Object.entries(raw).map(([k, v]) => [`vllm-cluster:${k}`, typeof v === "string" ? v : JSON.stringify(v)]),
        );
        try {
            pulumi.runtime.setAllConfig(all, ["vllm-cluster:image", "vllm-cluster:ray"]);
            let message = "";
            try {
                loadConfig();
            } catch (e) {
                message = (e as Error).message;
            }
            expect(message).toBe(
                "invalid vllm-cluster stack config (2 problem(s)):\n" +
                    "  - image: set with --secret, but its values are stored in the state and on the hosts in clear (a build argument is also recorded in the image's history): nothing in image may be secret; keep the secret out of it (set image without --secret)\n" +
                    "  - ray: set with --secret, but its values are stored in the state and on the hosts in clear: nothing in ray may be secret; keep the secret out of it (set ray without --secret)",
            );
            expect(message).not.toContain("from secret config");
            pulumi.runtime.setAllConfig(all, ["vllm-cluster:nodes", "vllm-cluster:serve"]);
            expect(loadConfig().image.build?.args).toEqual({ PIP_TOKEN: "from secret config" });
        } finally {
            pulumi.runtime.setAllConfig({}, []);
        }
    });
});

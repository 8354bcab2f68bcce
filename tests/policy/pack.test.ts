import { PolicyPack, PolicyPackArgs, UnknownValueError } from "@pulumi/policy";
import "../../policies";
import { UNKNOWN, resourceArgs, serve, withProps } from "./util";

// index.ts starts the policy server when it constructs the pack; record the constructor's arguments instead.
jest.mock("@pulumi/policy", () => ({ ...jest.requireActual("@pulumi/policy"), PolicyPack: jest.fn() }));

describe("vllm-cluster policy pack", () => {
    const calls = jest.mocked(PolicyPack).mock.calls;
    const [name, args] = calls[0] as [string, PolicyPackArgs];

    it("is constructed once, in policies/index.ts", () => {
        expect(calls).toHaveLength(1);
        expect(name).toBe("vllm-cluster");
    });

    it("assembles the fourteen policies with unique names", () => {
        const names = args.policies.map((p) => p.name);
        expect(names).toEqual([
            "gpu-memory-utilization",
            "no-port-clash",
            "parallelism-matches-gpus",
            "ray-dashboard-loopback",
            "serve-requires-api-key",
            "gpu-containers-host-ipc",
            "image-pinned",
            "ray-token-auth",
            "host-mounts-safe",
            "serve-bind-needs-tls",
            "native-rendezvous-on-fabric",
            "unified-memory-guarded",
            "hub-revision-pinned",
            "gpu-memory-shared",
        ]);
    });

    it("makes every policy mandatory except the two pinning advisories", () => {
        const levels = Object.fromEntries(args.policies.map((p) => [p.name, p.enforcementLevel]));
        expect(levels["image-pinned"]).toBe("advisory");
        expect(levels["hub-revision-pinned"]).toBe("advisory");
        // unauthenticated Ray is remote code execution for anyone on the fabric: blocked, not reported
        expect(levels["ray-token-auth"]).toBe("mandatory");
        for (const [policyName, level] of Object.entries(levels)) {
            if (policyName !== "image-pinned" && policyName !== "hub-revision-pinned") expect(level).toBe("mandatory");
        }
    });

    it("gives every config property a default", () => {
        for (const p of args.policies) {
            for (const [key, schema] of Object.entries(p.configSchema?.properties ?? {})) {
                expect([p.name, key, typeof schema === "object" && schema.default !== undefined]).toEqual([p.name, key, true]);
            }
        }
    });
});

describe("test harness", () => {
    // Guards the preview tests from passing vacuously: the props must throw on unknowns as the engine's do.
    it("hands policies props that throw UnknownValueError on unknown values", () => {
        const args = resourceArgs({ name: "s", props: withProps(serve(), { command: UNKNOWN }) });
        expect(() => args.props.command).toThrow(UnknownValueError);
    });
});

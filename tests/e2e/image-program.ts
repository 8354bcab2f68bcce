// Throwaway Pulumi program for tests/e2e/run.sh, copied into a temp dir as index.ts with the relative imports
// made absolute: the repo's ImagePresence dynamic provider and command builders, wired the way
// components/imageDistribution.ts wires them for source=host, make the testbed image present on spark-3 and
// spark-4 from spark-1. SparkNode (preflight, docker provider) needs the provider plugins that are missing here,
// so the nodes' ssh targets are built directly.
import * as os from "os";
import * as pulumi from "@pulumi/pulumi";
import { ImageOrigin, SshTarget, imageEnsureScript, imageInspectScript } from "../../components/commands";
import { ImagePresence } from "../../components/imageProvider";

const cfg = new pulumi.Config();
const stateDir = process.env.VCL_TESTBED_DIR || "/var/lib/vllm-cluster-testbed";
const ref = cfg.get("ref") ?? "vllm-cluster-testbed:latest";
const target = (host: string): SshTarget => ({
    user: "root",
    host,
    port: 22,
    privateKeyPath: `${stateDir}/ssh/id_ed25519`,
    knownHostsFile: `${stateDir}/ssh/known_hosts`,
});
const nodes: Record<string, SshTarget> = {
    "spark-1": target("10.231.0.11"),
    "spark-3": target("10.231.0.13"),
    "spark-4": target("10.231.0.14"),
};
// The simulated hosts share this machine's kernel, so `uname -m` there is this machine's (the real program
// takes it from each host's preflight).
const hostArch = os.machine();
const origin: ImageOrigin = { kind: "host", node: "spark-1", target: nodes["spark-1"] };

const presence = (node: string, expectedId?: pulumi.Input<string>) =>
    new ImagePresence(`image-${node}`, {
        node,
        ref,
        ensureScript: imageEnsureScript(origin, nodes[node], node, ref),
        inspectScript: imageInspectScript(nodes[node], ref),
        expectedId,
        hostArch,
    });

const source = presence("spark-1");
export const imageIds = {
    "spark-1": source.imageId,
    "spark-3": presence("spark-3", source.imageId).imageId,
    "spark-4": presence("spark-4", source.imageId).imageId,
};

import { PolicyPack } from "@pulumi/policy";
import { gpuContainersHostIpc } from "./gpuContainersHostIpc";
import { gpuMemoryShared } from "./gpuMemoryShared";
import { gpuMemoryUtilization } from "./gpuMemoryUtilization";
import { hostMountsSafe } from "./hostMountsSafe";
import { hubRevisionPinned } from "./hubRevisionPinned";
import { imagePinned } from "./imagePinned";
import { nativeRendezvousOnFabric } from "./nativeRendezvousOnFabric";
import { noPortClash } from "./noPortClash";
import { parallelismMatchesGpus } from "./parallelismMatchesGpus";
import { rayDashboardLoopback } from "./rayDashboardLoopback";
import { rayTokenAuth } from "./rayTokenAuth";
import { serveBindTls } from "./serveBindTls";
import { serveRequiresApiKey } from "./serveRequiresApiKey";
import { unifiedMemoryGuarded } from "./unifiedMemoryGuarded";

new PolicyPack("vllm-cluster", {
    description: "Guards for multi-node vLLM on GPU hosts deployed by the vllm-cluster program",
    policies: [
        gpuMemoryUtilization,
        noPortClash,
        parallelismMatchesGpus,
        rayDashboardLoopback,
        serveRequiresApiKey,
        gpuContainersHostIpc,
        imagePinned,
        rayTokenAuth,
        hostMountsSafe,
        serveBindTls,
        nativeRendezvousOnFabric,
        unifiedMemoryGuarded,
        hubRevisionPinned,
        gpuMemoryShared,
    ],
});

/**
 * VllmCluster as a component package for programs in other languages (PulumiPlugin.yaml): the engine runs this
 * folder, and every component class exported here becomes a resource of the package `vllm-cluster` (package.json's
 * name), so the cluster's type token is `vllm-cluster:index:VllmCluster`, as in a TypeScript program.
 *
 * Its code is the repository's components/ and infra/, and so are its npm packages: it has no dependencies of its
 * own (a second copy of @pulumi/pulumi here would not share the runtime the components register with) and runs from a
 * checkout where `npm ci` ran (docs/component.md).
 */
import { redactSdkDebugLog } from "../infra/sdkLogRedaction";

// As in the stack program, before any resource: the SDK's debug log would otherwise put secret outputs into the
// engine's events.
redactSdkDebugLog();

export { VllmCluster } from "../components";

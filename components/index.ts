/**
 * The package's entry point: VllmCluster, its arguments and its outputs' types. Another TypeScript program imports it
 * as a library (docs/component.md).
 */
export { VllmCluster } from "./vllmCluster";
export type { ClusterNode } from "./vllmCluster";
export * from "./vllmClusterArgs";

/**
 * The package's entry point: VllmCluster, its arguments and its outputs' types. Another TypeScript program imports it
 * as a library; package/ re-exports it as a component package for programs in other languages (docs/component.md).
 */
export { VllmCluster } from "./vllmCluster";
export type { ClusterNode } from "./vllmCluster";
export * from "./vllmClusterArgs";

# shellcheck shell=bash
# Sourced by the stages that write results: where they go (tests/lib/results.js says the same for node), and how a
# developer publishes them. Results go only under $VCL_RESULTS_DIR, never into the tree; the figures in the docs
# come from committed copies, which `npm run docs -- --accept DIR` replaces with a run's.
VCL_RESULTS_DIR="${VCL_RESULTS_DIR:-${TMPDIR:-/tmp}/vllm-cluster-results}"
export VCL_RESULTS_DIR

# accept_hint WHAT: the command that publishes this run's figures into the docs.
accept_hint() {
  echo "$1: results in $VCL_RESULTS_DIR; to publish them in the docs: npm run docs -- --accept $VCL_RESULTS_DIR"
}

# shellcheck shell=bash
# Shared by preview.sh and up.sh: the toolchain on PATH, the repository root as working directory, the stack file
# checked (exit 2 naming it), npm packages present, and the stack selected (created in the backend if new).

gitops_select_stack() { # <script name> <stack>
  local who="$1" stack="$2" root
  root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
  # shellcheck source=../env.sh
  source "$root/setup/env.sh"
  cd "$root" || exit 1
  if [[ ! -f "stacks/Pulumi.$stack.yaml" ]]; then
    echo "$who: no stack file stacks/Pulumi.$stack.yaml" >&2
    exit 2
  fi
  [[ -d node_modules ]] || npm ci --no-audit --no-fund
  pulumi stack select "$stack" --create --non-interactive >/dev/null
}

# The config file pulumi reads for this run, as arguments in GITOPS_CONFIG_ARGS (empty: the stack file itself).
#
# With GITOPS_SSH_DIR set (setup/gitops/ssh-setup.sh sets it for the deploy it runs; a preview sets it to the same
# directory name so that it computes the same ssh options the deploy records), the run reads a copy of
# stacks/Pulumi.<stack>.yaml whose ssh.privateKeyPath and ssh.knownHostsFile name the files in that directory:
# Pulumi's own `--config-file`, so the checked-out stack file is never written and nothing is left to commit. The
# copy lives in a temporary directory named in GITOPS_CONFIG_TMP; the caller removes it.
# shellcheck disable=SC2034 # GITOPS_CONFIG_ARGS and GITOPS_CONFIG_TMP are read by preview.sh and up.sh
gitops_config_file() { # <script name> <stack>   (after gitops_select_stack)
  local who="$1" stack="$2" cfg
  GITOPS_CONFIG_ARGS=()
  GITOPS_CONFIG_TMP=""
  [[ -n "${GITOPS_SSH_DIR:-}" ]] || return 0
  if [[ "$GITOPS_SSH_DIR" != /* || "$GITOPS_SSH_DIR" =~ [[:space:]\'\"\\] ]]; then
    echo "$who: GITOPS_SSH_DIR must be an absolute path without spaces or quotes (got: $GITOPS_SSH_DIR)" >&2
    exit 2
  fi
  GITOPS_CONFIG_TMP=$(mktemp -d "${RUNNER_TEMP:-${TMPDIR:-/tmp}}/vcl-stack-config.XXXXXX")
  cfg="$GITOPS_CONFIG_TMP/Pulumi.$stack.yaml"
  cp "stacks/Pulumi.$stack.yaml" "$cfg"
  pulumi config set --stack "$stack" --config-file "$cfg" --path "vllm-cluster:ssh.privateKeyPath" "$GITOPS_SSH_DIR/deploy_key"
  pulumi config set --stack "$stack" --config-file "$cfg" --path "vllm-cluster:ssh.knownHostsFile" "$GITOPS_SSH_DIR/known_hosts"
  GITOPS_CONFIG_ARGS=(--config-file "$cfg")
  echo "$who: ssh.privateKeyPath and ssh.knownHostsFile point at $GITOPS_SSH_DIR for this run"
}

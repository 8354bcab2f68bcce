#!/usr/bin/env bash
# stage: GitOps preview script against the local stack on the simulated hosts
#
# Runs setup/gitops/preview.sh exactly as the pull-request workflow does, against the `local` stack on the
# simulated hosts, with a throwaway state backend. Checks the script's own behaviour for real (usage errors,
# the markdown it writes for the pull-request comment, exit code propagation); the preview itself must pass when
# the toolchain is complete (setup/toolchain.sh provides it). Then, on copies of the repository: the stack with its
# TLS certificate and key as secret config and no file named (what a GitOps runner has), whose program also prints
# the job's secrets (the comment, made from the preview's summary and diff only, holds neither the print nor the
# values); and a key file named but absent (the error names the key, the path and the secret-config alternative).
set -uo pipefail
REPO_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
cd "$REPO_ROOT" || exit 1
# shellcheck source=../lib/results.sh
source "$REPO_ROOT/tests/lib/results.sh"
# shellcheck source=../../setup/env.sh
source "$REPO_ROOT/setup/env.sh" >/dev/null

WORK=$(mktemp -d "${TMPDIR:-/tmp}/vcl-gitops.XXXXXX")
trap 'rm -rf "$WORK"' EXIT
export PULUMI_BACKEND_URL="file://$WORK/state" PULUMI_CONFIG_PASSPHRASE="vllm-cluster-local-simulated-only"
mkdir -p "$WORK/state"

bash setup/gitops/preview.sh no-such-stack >"$WORK/usage.log" 2>&1
rc=$?
((rc == 2)) && grep -q "no stack file stacks/Pulumi.no-such-stack.yaml" "$WORK/usage.log" &&
  pass "unknown stack: exit 2 naming the missing stack file" || fail "unknown stack: exit 2 naming the missing stack file (got $rc)"

timeout --foreground 1200 tests/testbed/testbed up 2 >"$WORK/testbed.log" 2>&1 || { tail -n 20 "$WORK/testbed.log"; fail "testbed up 2"; }
before=$(git status --porcelain)
timeout --foreground 900 bash setup/gitops/preview.sh local "$WORK/preview.md" >"$WORK/preview.log" 2>&1
rc=$?
[[ "$(git status --porcelain)" == "$before" ]] && pass "the preview leaves the repository tree unchanged" || fail "the preview changed the repository tree"
head -n 1 "$WORK/preview.md" 2>/dev/null | grep -qx '<!-- vllm-cluster-preview:local -->' &&
  pass "pull-request comment written with its per-stack marker" || fail "pull-request comment written with its per-stack marker"
grep -q "PULUMI_CONFIG_PASSPHRASE\|$PULUMI_CONFIG_PASSPHRASE" "$WORK/preview.md" "$WORK/preview.log" &&
  fail "the passphrase appears in the preview output" || pass "no secret in the preview output or comment"

((rc == 0)) && grep -q "passed" "$WORK/preview.md" && pass "local stack: preview with policies passes" ||
  { tail -n 30 "$WORK/preview.log"; fail "local stack: preview with policies passes (exit $rc)"; }

# The rest runs on copies of the tracked files, so the repository's stack file is never edited.
copy_repo() { # DIR
  mkdir -p "$1"
  git ls-files -z | xargs -0 cp --parents -t "$1"
  ln -s "$REPO_ROOT/node_modules" "$1/node_modules"
}

# A failing preview (an invalid stack config) propagates its exit code, and the comment says FAILED with the cause.
copy_repo "$WORK/repo"
sed -i 's/tensorParallelSize: 2/tensorParallelSize: 4/' "$WORK/repo/stacks/Pulumi.local.yaml"
timeout --foreground 900 bash "$WORK/repo/setup/gitops/preview.sh" local "$WORK/bad.md" >"$WORK/bad.log" 2>&1
rc=$?
((rc != 0)) && grep -q "FAILED (exit $rc)" "$WORK/bad.md" && grep -q "serve.tensorParallelSize" "$WORK/bad.md" &&
  pass "a failing preview propagates its exit code ($rc) and the comment says FAILED naming the key" ||
  { tail -n 20 "$WORK/bad.log"; fail "a failing preview propagates its exit code and the comment says FAILED naming the key"; }

# TLS as secret config, no file named: what a runner without the operator's files previews. Its program also prints
# the job's secrets (the passphrase, a state credential), as a pull request's code could.
copy_repo "$WORK/tls"
(cd "$WORK/tls" && pulumi stack select local --create --non-interactive >/dev/null)
cert_file=$(cd "$WORK/tls" && pulumi config get --path serve.tls.certFile)
key_file=$(cd "$WORK/tls" && pulumi config get --path serve.tls.keyFile)
(
  cd "$WORK/tls" &&
    pulumi config set --path serve.tls.cert <"$cert_file" &&
    pulumi config set --secret --path serve.tls.key <"$key_file" &&
    pulumi config rm --path serve.tls.certFile && pulumi config rm --path serve.tls.keyFile
) >"$WORK/tls-config.log" 2>&1 || { cat "$WORK/tls-config.log"; fail "TLS set as secret config in the copy"; }
# (the certificate is public and stays readable; the key is there only encrypted)
if grep -q "certFile\|keyFile\|PRIVATE KEY" "$WORK/tls/stacks/Pulumi.local.yaml" ||
  ! grep -q "BEGIN CERTIFICATE" "$WORK/tls/stacks/Pulumi.local.yaml"; then
  fail "the copy's stack names no TLS file and holds the key only encrypted"
else
  pass "the copy's stack names no TLS file and holds the key only encrypted"
fi
state_secret="vcl-state-credential-$RANDOM$RANDOM"
printf '%s\n' 'console.log(`printed by the program: ${process.env.PULUMI_CONFIG_PASSPHRASE} ${process.env.AWS_SECRET_ACCESS_KEY}`);' \
  >>"$WORK/tls/infra/index.ts"
AWS_SECRET_ACCESS_KEY=$state_secret timeout --foreground 900 bash "$WORK/tls/setup/gitops/preview.sh" local "$WORK/tls.md" \
  >"$WORK/tls.log" 2>&1
rc=$?
((rc == 0)) && grep -q "passed" "$WORK/tls.md" && pass "TLS as secret config with no file on disk: preview with policies passes" ||
  { tail -n 30 "$WORK/tls.log"; fail "TLS as secret config with no file on disk: preview with policies passes (exit $rc)"; }
grep -q "printed by the program: $PULUMI_CONFIG_PASSPHRASE $state_secret" "$WORK/tls.log" &&
  pass "the program printed the job's secrets (into the job log, which GitHub masks)" ||
  fail "the program printed the job's secrets (into the job log, which GitHub masks)" "$(tail -n 5 "$WORK/tls.log")"
key_line=$(sed -n 2p "$key_file")
if grep -qF -e "printed by the program" -e "$PULUMI_CONFIG_PASSPHRASE" -e "$state_secret" -e "$key_line" "$WORK/tls.md"; then
  fail "the comment holds none of it: no program output, no secret value, no line of the key" "$(cat "$WORK/tls.md")"
else
  pass "the comment holds none of it: no program output, no secret value, no line of the key"
fi
grep -q '^+  create   docker:index/container:Container  serve-container$' "$WORK/tls.md" &&
  pass "the comment shows the changes (serve-container to create)" || fail "the comment shows the changes" "$(head -n 30 "$WORK/tls.md")"

# A key file named but absent: the error names the key, the path and the secret-config alternative.
copy_repo "$WORK/missing"
sed -i 's|keyFile: .*|keyFile: /nonexistent/vllm-cluster/api-key.pem|' "$WORK/missing/stacks/Pulumi.local.yaml"
timeout --foreground 900 bash "$WORK/missing/setup/gitops/preview.sh" local "$WORK/missing.md" >"$WORK/missing.log" 2>&1
rc=$?
want="serve.tls.keyFile: cannot read /nonexistent/vllm-cluster/api-key.pem (ENOENT); on a machine without this file (a GitOps runner), give the key as secret config instead: pulumi config set --secret --path serve.tls.key < api-key.pem"
((rc != 0)) && grep -qF "$want" "$WORK/missing.md" && grep -qF "$want" "$WORK/missing.log" &&
  pass "a key file named but absent: FAILED naming the key, the path and the secret-config alternative" ||
  { tail -n 20 "$WORK/missing.log"; fail "a key file named but absent: FAILED naming the key, the path and the secret-config alternative (exit $rc)"; }
[[ "$(git status --porcelain)" == "$before" ]] && pass "the repository tree is unchanged afterwards" || fail "the repository tree changed"
finish

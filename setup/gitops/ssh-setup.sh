#!/usr/bin/env bash
# Run one command with the deploy key and the pinned host keys, then remove them.
#
#   setup/gitops/ssh-setup.sh COMMAND [ARG...]   write SSH_PRIVATE_KEY and SSH_KNOWN_HOSTS into a directory of the
#                                                job's own, run COMMAND with GITOPS_SSH_DIR naming it, remove it
#   setup/gitops/ssh-setup.sh --cleanup          remove that directory (the workflow's `if: always()` step, for a
#                                                job cancelled or killed before the command ended)
#
# The directory is $RUNNER_TEMP/vllm-cluster-ssh (mode 700, files mode 600): the runner empties RUNNER_TEMP at the
# start and end of every job, so the key never outlives the job even on a persistent self-hosted runner, and nothing
# is written into the runner user's own ssh directory or known_hosts (its keys stay its own, and no later job finds
# the deploy key there). setup/gitops/lib.sh points the stack's ssh.privateKeyPath and ssh.knownHostsFile at the
# directory for that one run (GITOPS_SSH_DIR). The key is never printed, and COMMAND does not inherit
# SSH_PRIVATE_KEY. Exit code: COMMAND's; 64 usage; 1 missing or unusable input (nothing is left behind).
set -euo pipefail
die() { echo "ssh-setup: $*" >&2; exit 1; }
[[ $# -gt 0 ]] || { echo "usage: ssh-setup.sh COMMAND [ARG...] | ssh-setup.sh --cleanup" >&2; exit 64; }
[[ -n "${RUNNER_TEMP:-}" ]] || die "RUNNER_TEMP is not set (the CI job's own temporary directory)"
[[ -d "$RUNNER_TEMP" ]] || die "RUNNER_TEMP ($RUNNER_TEMP) is not a directory"
dir="$RUNNER_TEMP/vllm-cluster-ssh"
cleanup() { rm -rf -- "$dir"; }

if [[ "$1" == --cleanup ]]; then
  (($# == 1)) || { echo "usage: ssh-setup.sh --cleanup" >&2; exit 64; }
  cleanup
  echo "ssh-setup: removed $dir"
  exit 0
fi

[[ -n "${SSH_PRIVATE_KEY:-}" ]] || die "SSH_PRIVATE_KEY is not set (the deploy environment's secret holding the deploy key)"
[[ -n "${SSH_KNOWN_HOSTS:-}" ]] || die "SSH_KNOWN_HOSTS is not set (a variable holding the hosts' public keys)"
command -v ssh-keygen >/dev/null || die "ssh-keygen is not installed (the deploy needs OpenSSH's client)"

# A directory left by a job that was killed before its cleanup is removed, never reused.
cleanup
trap cleanup EXIT
umask 077
mkdir -m 700 "$dir"
# One trailing newline each, whatever the secret's text ended with; no carriage return in the key (ssh refuses them).
key_text=${SSH_PRIVATE_KEY//$'\r'/}
hosts_text=$SSH_KNOWN_HOSTS
while [[ "$key_text" == *$'\n' ]]; do key_text=${key_text%$'\n'}; done
while [[ "$hosts_text" == *$'\n' ]]; do hosts_text=${hosts_text%$'\n'}; done
printf '%s\n' "$key_text" >"$dir/deploy_key"
printf '%s\n' "$hosts_text" >"$dir/known_hosts"
unset key_text hosts_text
chmod 600 "$dir/deploy_key" "$dir/known_hosts"
# A passphrase-protected or mangled key would only fail later, inside ssh's BatchMode, host by host.
ssh-keygen -y -P "" -f "$dir/deploy_key" >/dev/null 2>&1 ||
  die "SSH_PRIVATE_KEY is not an OpenSSH private key without a passphrase"
lines=$(grep -cv '^[[:space:]]*\(#\|$\)' "$dir/known_hosts" || true)
((lines > 0)) || die "SSH_KNOWN_HOSTS holds no host key line"

unset SSH_PRIVATE_KEY
export GITOPS_SSH_DIR="$dir"
echo "ssh-setup: deploy key and $lines host key line(s) in $dir until the command ends"
set +e
"$@"
rc=$?
set -e
exit "$rc"

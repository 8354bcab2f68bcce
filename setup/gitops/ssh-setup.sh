#!/usr/bin/env bash
# Write the deploy key and the pinned host keys from the CI system's secrets (environment variables
# SSH_PRIVATE_KEY and SSH_KNOWN_HOSTS) to the paths the stack files name (~/.ssh/id_ed25519, ~/.ssh/known_hosts).
# Never prints them; refuses to overwrite a different existing key (a runner's own key stays its own).
set -euo pipefail
: "${SSH_PRIVATE_KEY:?SSH_PRIVATE_KEY is not set (a CI secret holding the deploy key)}"
: "${SSH_KNOWN_HOSTS:?SSH_KNOWN_HOSTS is not set (a CI secret or variable holding the hosts\' public keys)}"
umask 077
mkdir -p "$HOME/.ssh"
key="$HOME/.ssh/id_ed25519"
tmp=$(mktemp "$HOME/.ssh/.deploy-key.XXXXXX")
trap 'rm -f "$tmp"' EXIT
printf '%s\n' "$SSH_PRIVATE_KEY" >"$tmp"
if [[ -f "$key" ]] && ! cmp -s "$tmp" "$key"; then
  echo "ssh-setup: $key exists and differs from the deploy key; not overwriting it" >&2
  exit 1
fi
mv "$tmp" "$key"
printf '%s\n' "$SSH_KNOWN_HOSTS" >"$HOME/.ssh/known_hosts.vllm-cluster"
# Merge without duplicates; the stack files point at ~/.ssh/known_hosts.
touch "$HOME/.ssh/known_hosts"
sort -u "$HOME/.ssh/known_hosts" "$HOME/.ssh/known_hosts.vllm-cluster" >"$HOME/.ssh/known_hosts.new"
mv "$HOME/.ssh/known_hosts.new" "$HOME/.ssh/known_hosts"
rm -f "$HOME/.ssh/known_hosts.vllm-cluster"
echo "ssh-setup: deploy key and $(grep -c . <<<"$SSH_KNOWN_HOSTS") host key line(s) in place"

#!/usr/bin/env bash
# Discovery's probe (setup/discover.js): runs on one host as the login user (`ssh ... bash -s -- MODEL_PATH`),
# changes nothing there, and prints one fact a line as TAB-separated fields (the first names the fact):
#   hostname NAME | user NAME | home DIR | reached ADDRESS (the host's end of this SSH connection) | arch MACHINE | cpus N | cpu MODEL | mem_kib N
#   gpu INDEX NAME MEMORY_MIB ("[N/A]" on unified memory) | nvidia_smi absent|error TEXT
#   docker ok VERSION RUNTIMES_JSON | docker error TEXT
#   disk PATH_CHECKED FREE_BYTES
#   addr IFNAME CIDR (every IPv4 address) | rdma DEVICE NETDEV (/sys/class/infiniband/*/device/net/*)
set -u
model_path="${1:-}"
sysfs="${VCL_PROBE_SYSFS:-/sys}" # another root only for the probe's own tests

fact() { local IFS=$'\t'; printf '%s\n' "$*"; }
# one line of printable text (discover.js reduces every field to printable text again: a host may lie)
oneline() { tr '\n\t' '  ' | LC_ALL=C tr -d '[:cntrl:]' | cut -c1-300; }

fact hostname "$(hostname)"
fact user "$(id -un)"
fact home "$HOME"
read -r -a conn <<<"${SSH_CONNECTION:-}"
fact reached "${conn[2]:-}"
fact arch "$(uname -m)"
fact cpus "$(nproc)"
cpu="$(awk -F': *' '/^(model name|Model name)/ { print $2; exit }' /proc/cpuinfo 2>/dev/null)"
[[ -n $cpu ]] || cpu="$(LC_ALL=C lscpu 2>/dev/null | awk -F': *' '/^Model name/ { print $2; exit }')"
fact cpu "${cpu:-unknown}"
fact mem_kib "$(awk '/^MemTotal:/ { print $2 }' /proc/meminfo)"

if command -v nvidia-smi >/dev/null 2>&1; then
  if out="$(nvidia-smi --query-gpu=index,name,memory.total --format=csv,noheader,nounits 2>&1)"; then
    while IFS=, read -r index name mem; do
      [[ -n $index ]] && fact gpu "$index" "$(echo "$name" | xargs)" "$(echo "$mem" | xargs)"
    done <<<"$out"
  else
    fact nvidia_smi error "$(oneline <<<"$out")"
  fi
else
  fact nvidia_smi absent
fi

if ! command -v docker >/dev/null 2>&1; then
  fact docker error "no docker command on PATH"
elif out="$(docker info --format '{{.ServerVersion}}{{"\t"}}{{json .Runtimes}}' 2>&1)"; then
  fact docker ok "$out"
else
  fact docker error "$(oneline <<<"$out")"
fi

if [[ -n $model_path ]]; then
  p="$model_path"
  [[ $p == "~"* ]] && p="$HOME${p:1}"
  while [[ ! -e $p && $p != / ]]; do p="$(dirname "$p")"; done
  fact disk "$p" "$(df -B1 --output=avail "$p" 2>/dev/null | tail -n1 | xargs)"
fi

ip -o -4 addr show 2>/dev/null | awk -v OFS='\t' '{ print "addr", $2, $4 }'

for dev in "$sysfs"/class/infiniband/*; do
  for net in "$dev"/device/net/*; do
    [[ -e $net ]] && fact rdma "${dev##*/}" "${net##*/}"
  done
done
exit 0

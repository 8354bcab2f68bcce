#!/usr/bin/env bash
# Timeline of one Pulumi operation from its engine event log: a text table, and with --png a Gantt chart.
#   PULUMI_DEBUG_COMMANDS=true pulumi up --event-log /tmp/up-events.jsonl
#   bash setup/timeline.sh /tmp/up-events.jsonl --png up.png [--json up.json] [--title TEXT] [--all]
# Runs setup/timeline.py (see its docstring). For --png it first installs Pillow (pinned) once, with pip and the
# machine's own pip configuration, into a cache outside the repository:
#   ${XDG_CACHE_HOME:-~/.cache}/vllm-cluster/tools/pillow-<version>/
set -euo pipefail

PILLOW_VERSION="11.3.0"
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
PILLOW_DIR="${XDG_CACHE_HOME:-$HOME/.cache}/vllm-cluster/tools/pillow-${PILLOW_VERSION}"

pillow_works() {
  PYTHONPATH="$PILLOW_DIR" python3 -c 'import PIL.Image, PIL.ImageFont' >/dev/null 2>&1
}

install_pillow() {
  local tmp log
  echo "timeline: installing Pillow ${PILLOW_VERSION} once into ${PILLOW_DIR}" >&2
  mkdir -p "$(dirname "$PILLOW_DIR")"
  tmp="$(mktemp -d "${PILLOW_DIR}.tmp.XXXXXX")"
  log="${tmp}.log"
  if ! python3 -m pip install --quiet --disable-pip-version-check --no-input --target "$tmp" \
    "pillow==${PILLOW_VERSION}" >"$log" 2>&1; then
    cat "$log" >&2
    rm -rf "$tmp" "$log"
    echo "timeline: could not install Pillow ${PILLOW_VERSION} (pip output above); the text table needs no Pillow" >&2
    exit 1
  fi
  rm -f "$log"
  # a copy that no longer imports (another Python, a broken install) is replaced; a concurrent install may win
  rm -rf "$PILLOW_DIR"
  mv -T "$tmp" "$PILLOW_DIR" 2>/dev/null || rm -rf "$tmp"
}

for arg in "$@"; do
  if [[ "$arg" == --png || "$arg" == --png=* ]]; then
    pillow_works || install_pillow
    break
  fi
done

PYTHONPATH="$PILLOW_DIR${PYTHONPATH:+:$PYTHONPATH}" exec python3 "$HERE/timeline.py" "$@"

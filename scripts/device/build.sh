#!/usr/bin/env bash
# On the GPU machine: configure and build reshard (Release, CUDA + NCCL) into build-device/.
# NCCL: PyTorch's bundled 2.28.9 (headers and libnccl.so.2 under site-packages/nvidia/nccl), never the system's 2.28.3
# (its symmetric kernels corrupt data, fixed in 2.28.7). CLI11 is not installed there: its headers travel in
# .deps/include (copied from Debian's libcli11-dev on the development machine; carry ".deps").
set -euo pipefail
cd "$(dirname "$0")/../.."
export NCCL_NVLS_ENABLE=0
nccl_home=$(python3 -c 'import nvidia.nccl, os; print(os.path.dirname(nvidia.nccl.__file__) if nvidia.nccl.__file__ else list(nvidia.nccl.__path__)[0])' 2>/dev/null || true)
[ -n "$nccl_home" ] && [ -f "$nccl_home/include/nccl.h" ] && export NCCL_HOME="$nccl_home"
cmake -S . -B build-device -G Ninja -DCMAKE_BUILD_TYPE=Release -DRESHARD_CUDA=ON -DRESHARD_DEPS_DIR="$PWD/.deps" \
  -DCMAKE_CUDA_ARCHITECTURES=90 ${NCCL_HOME:+-DNCCL_INCLUDE_DIR=$NCCL_HOME/include -DNCCL_LIBRARY=$NCCL_HOME/lib/libnccl.so.2} \
  "$@" > /tmp/configure.log 2>&1 || { tail -40 /tmp/configure.log; exit 1; }
grep -E "Found NCCL|Python package" /tmp/configure.log || true
cmake --build build-device --parallel "$(nproc)" > /tmp/build.log 2>&1 || { grep -E "error|Error" -A3 /tmp/build.log | head -60; exit 1; }
echo "build ok (NCCL ${NCCL_HOME:-system})"

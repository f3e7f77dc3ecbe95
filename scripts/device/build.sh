#!/usr/bin/env bash
# On the GPU machine: configure and build reshard (Release, CUDA + NCCL) into build-device/.
# CLI11 is not installed there; its headers travel in .deps/include (see scripts/device/README.md).
set -euo pipefail
cd "$(dirname "$0")/../.."
export NCCL_NVLS_ENABLE=0
cmake -S . -B build-device -G Ninja -DCMAKE_BUILD_TYPE=Release -DRESHARD_CUDA=ON -DRESHARD_DEPS_DIR="$PWD/.deps" \
  -DCMAKE_CUDA_ARCHITECTURES=90 > /tmp/configure.log 2>&1 || { tail -40 /tmp/configure.log; exit 1; }
cmake --build build-device --parallel "$(nproc)" > /tmp/build.log 2>&1 || { grep -E "error|Error" -A3 /tmp/build.log | head -60; exit 1; }
echo "build ok"

#!/usr/bin/env bash
# On the GPU machine: bench/probes/ipc_link.cu (two processes reading and writing each other's memory through CUDA IPC
# mappings) and, for the same machine's in-process figures, bench/probes/link_split.cu, 512 MiB per GPU and direction.
# Output: $OUT/ipc_link.txt.
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:-/tmp}
nvcc -std=c++17 -arch=sm_90 -O3 -o /tmp/ipc_link bench/probes/ipc_link.cu || exit 1
nvcc -std=c++17 -arch=sm_90 -O3 -o /tmp/link_split bench/probes/link_split.cu || exit 1
{ date -u; nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | head -2
  CUDA_VISIBLE_DEVICES=${GPUS:-0,1} timeout 150 /tmp/ipc_link ${MIB:-512}
  CUDA_VISIBLE_DEVICES=${GPUS:-0,1} timeout 150 /tmp/link_split ${MIB:-512} | grep -E "^(mode|ce |ce-push|pull |ce\+local)"
} 2>&1 | tee "$OUT/ipc_link.txt"

#!/usr/bin/env bash
# On the GPU machine: bench/probes/link_split.cu on GPUs 0 and 1 (copy engines, kernels and both at once over NVLink;
# reductions of the peer's half), 512 MiB and 128 MiB per GPU and direction. Output: $OUT/link_split.txt.
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:-/tmp}
nvcc -std=c++17 -arch=sm_90 -O3 -o /tmp/link_split bench/probes/link_split.cu || exit 1
{ date -u; nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | head -2
  for mib in ${SIZES:-512 128}; do CUDA_VISIBLE_DEVICES=${GPUS:-0,1} timeout 120 /tmp/link_split "$mib"; done
} 2>&1 | tee "$OUT/link_split.txt"

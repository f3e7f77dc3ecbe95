#!/usr/bin/env bash
# On the GPU machine: bench/probes/host_lane.cu on GPUs 0 and 1 (PCIe through pinned host memory beside NVLink's copy
# engines), 512 MiB per GPU and direction, with the machine's topology. Output: $OUT/host_lane.txt.
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:-/tmp}
nvcc -std=c++17 -arch=sm_90 -O3 -o /tmp/host_lane bench/probes/host_lane.cu || exit 1
{ date -u; nvidia-smi --query-gpu=name,driver_version,pcie.link.gen.max,pcie.link.width.max --format=csv,noheader
  nvidia-smi topo -m; lscpu | grep -E "^(Model name|Socket|NUMA node)"
  for mib in ${SIZES:-512}; do CUDA_VISIBLE_DEVICES=${GPUS:-0,1} timeout 150 /tmp/host_lane "$mib"; done
} 2>&1 | tee "$OUT/host_lane.txt"

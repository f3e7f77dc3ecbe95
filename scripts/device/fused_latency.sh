#!/usr/bin/env bash
# Issue 14: where the per-call time of the fused one-sided step goes, on 2 GPUs (bench/probes/fused_latency.cu; no
# project build). Variants of the protocol at 4 KiB, 16 KiB (a 64x64 f32 S0->S1's pulled half... and more) and 1 MiB
# pulled per call, eager and replayed from CUDA graphs. Output under $OUT.
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:-/tmp}
export NCCL_NVLS_ENABLE=0
{ date -u; nvidia-smi --query-gpu=name,driver_version,clocks.sm --format=csv; } > "$OUT/machine.txt" 2>&1
nvcc -O3 -arch=sm_90 -o /tmp/fused_latency bench/probes/fused_latency.cu || exit 1
for b in ${SIZES:-4096 16384 1048576 2097152}; do
  timeout 60 /tmp/fused_latency $b 50 40 ${MODES:-} 2>&1 | tee -a "$OUT/fused_latency.txt"
done

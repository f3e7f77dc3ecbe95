#!/usr/bin/env bash
# On the 4-GPU machine (nvidia-h200-x4 or nvidia-h100-x4), every 4-GPU run of issue 23 in one call (about 575 s): build;
# the 4-GPU suite (every pair of R/S0/S1/P(sum) on (4) and (2,2), sizes 0, 1, uneven, every strategy and transport,
# in process and one process per GPU: x4_suite.sh with SKIP_2GPU=1); then x4_campaign.sh (the >= 256 MiB sweeps
# against the measured bound, in process and one process per GPU, 2x2 [S0,S1]->[S1,S0] 16384^2 bf16, small tensors,
# cross-mesh, PyTorch on the same cases, the Python checks on 4 processes). One archive under $OUT.
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:-/tmp}
t0=$(date +%s)
mkdir -p "$OUT/suite" "$OUT/campaign"
OUT="$OUT/suite" SKIP_2GPU=1 BUDGET=${SUITE_S:-170} bash scripts/device/x4_suite.sh 2>&1 | tail -20
OUT="$OUT/campaign" ARCHIVE=0 BUDGET=$(( ${BUDGET:-575} - ($(date +%s) - t0) )) bash scripts/device/x4_campaign.sh 2>&1 |
  tail -60
tar -C "$OUT" -czf /tmp/four_gpu.tgz suite campaign && rm -rf "${OUT:?}/suite" "${OUT:?}/campaign" &&
  mv /tmp/four_gpu.tgz "$OUT/"
echo "[$(( $(date +%s) - t0 )) s] done: $OUT/four_gpu.tgz"

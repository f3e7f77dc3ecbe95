#!/usr/bin/env bash
# On the 2-GPU machine: build, then `reshard overlap` (a 1 GiB f32 S0 -> S1 redistribution beside a bf16 8192^3 GEMM
# loop) with the nvlink and the nccl transport, each verified. Output in $OUT/overlap.txt (JSON in $OUT/overlap_*.json).
set -uo pipefail
cd "$(dirname "$0")/../.."
source scripts/device/lib.sh
t0=$(date +%s); stamp() { echo "[$(( $(date +%s) - t0 )) s] $*"; }
device_setup || exit 1
stamp built
{
for tr in nvlink nccl; do
  echo "== $tr"
  timeout 100 $R overlap --mesh 2 --from S0 --to S1 --shape 16384x16384 --strategy p2p --transport $tr \
    --gemm 8192x8192x8192:bf16 --repeats 5 --json "$OUT/overlap_$tr.json" 2>&1
  echo "exit $?"
  stamp "$tr done"
done
} 2>&1 | tee "$OUT/overlap.txt"

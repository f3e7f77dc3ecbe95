#!/usr/bin/env bash
# On the 2-GPU machine, one call (issue #19's GPU points that 2 GPUs can show): build; the batch GPU tests; 100 x 1 MiB
# in one call vs one 100 MiB tensor (ratio column, target <= 2); (2) -> (1) on rank 1 at 256 MiB and 1 GiB on both
# transports (every element checked by `run`). Three files under $OUT.
set -uo pipefail
cd "$(dirname "$0")/../.."
export NCCL_NVLS_ENABLE=0
OUT=${OUT:-/tmp}; R=build-device/tools/reshard
t0=$(date +%s); el() { echo $(( $(date +%s) - t0 )); }
bash scripts/device/build.sh > "$OUT/beyond.log" 2>&1 || { tail -30 "$OUT/beyond.log"; exit 1; }
echo "[$(el) s] built"
timeout 120 build-device/tests/batch_gpu_tests >> "$OUT/beyond.log" 2>&1; echo "batch gpu tests exit $?"
grep -E "^\[  (PASSED|FAILED) |^\[  FAILED|Failure" "$OUT/beyond.log" | head
for c in 1048576 0; do
  timeout 150 $R bench --backend nccl --batch 100 --meshes 2 --sizes 1MiB --dtypes f32 --placements S0,S1,R \
    --strategies collective,p2p --transports nccl --iters 50 --warmup 10 --coalesce-bytes $c \
    --csv "$OUT/batch100_coalesce$c.csv" 2>&1 | tail -12
done
echo "[$(el) s] batch"
for shape in 8192x8192 16384x16384; do for tr in nccl nvlink; do
  timeout 60 $R run --backend nccl --transport $tr --from-mesh 2 --to-mesh 1 --to-ranks 1 --from S0 --to R \
    --shape $shape --iters 20 2>&1 | grep -vE "^# (reshard run)" | tail -3
done; done | tee -a "$OUT/beyond.log"
echo "[$(el) s] done"

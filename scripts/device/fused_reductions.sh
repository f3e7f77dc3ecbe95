#!/usr/bin/env bash
# On the 2-GPU machine, one call: the fused one-sided reduction (issue 22). Mesh (2) P->S0 and P->R planned as
# reshard.torch plans them (--buffers-change, 2 ranks per node), one process per GPU, f32 at 1, 4, 16 and 64 MiB (bf16
# at 4 MiB) on nvlink fused, nvlink separate, auto and nccl; S0->S1 4 MiB auto for reference. Then (GPU_TESTS=1)
# executor_gpu_tests and shared_gpu_tests. Every run verified.
set -uo pipefail
cd "$(dirname "$0")/../.."
source scripts/device/lib.sh
archive_begin fused_reductions || exit 1
variants=("--transport nvlink --fuse always" "--transport nvlink --fuse never" "--transport auto" "--transport nccl")
for pair in "P S0" "P R"; do
  set -- $pair
  for shape in 512x512 1024x1024 2048x2048 4096x4096; do
    for v in "${variants[@]}"; do
      two_processes "$OUT/rows.txt" --from $1 --to $2 --shape $shape --dtype f32 --buffers-change --ranks-per-node 2 \
        --iters 50 $v
    done
  done
  for v in "${variants[@]}"; do
    two_processes "$OUT/rows.txt" --from $1 --to $2 --shape 1024x2048 --dtype bf16 --buffers-change --ranks-per-node 2 \
      --iters 50 $v
  done
done
two_processes "$OUT/rows.txt" --from S0 --to S1 --shape 1024x1024 --dtype f32 --buffers-change --ranks-per-node 2 \
  --iters 50 --transport auto
cat "$OUT/rows.txt"
echo "[$(el) s] benchmarks done"
if [ "${GPU_TESTS:-0}" = 1 ]; then
  for t in executor_gpu_tests shared_gpu_tests; do
    start=$SECONDS
    timeout 300 build-device/tests/$t > "$OUT/$t.log" 2>&1
    echo "$t: exit $? in $((SECONDS - start)) s"
    grep -E "^\[  (PASSED|FAILED) |Failure|verified runs|wrong" "$OUT/$t.log" | tail -8
  done
fi
archive_end

#!/usr/bin/env bash
# On the 2-GPU machine, one call: mesh (2) f32 1024x1024 (4 MiB) P->S0, P->R, S0->S1 and S0->R planned as reshard.torch
# plans them (--buffers-change, 2 ranks per node), one process per GPU as PyTorch runs, on each transport choice (auto,
# nvlink fused, nvlink separate, nccl), then the same with --trace in process (step phases); P->S0 and P->R also at
# 1 GiB. GPU_TESTS=1: then executor_gpu_tests. Every run verified.
set -uo pipefail
cd "$(dirname "$0")/../.."
source scripts/device/lib.sh
archive_begin staged_pairs || exit 1
for pair in "P S0" "P R" "S0 S1" "S0 R"; do
  set -- $pair
  for v in "--transport auto" "--transport nvlink --fuse always" "--transport nvlink --fuse never" "--transport nccl"; do
    two_processes "$OUT/rows.txt" --from $1 --to $2 --shape 1024x1024 --dtype f32 --buffers-change --ranks-per-node 2 \
      --iters 50 $v
  done
  timeout 60 $R run --backend nccl --mesh 2 --from $1 --to $2 --shape 1024x1024 --dtype f32 --buffers-change \
    --ranks-per-node 2 --transport nvlink --fuse never --iters 30 --trace 2>&1 | grep -E "^  |^# step|verified|error" |
    sed "s|\$|   [$1->$2 nvlink separate, traced, in process]|" >> "$OUT/traces.txt"
done
for pair in "P S0" "P R"; do
  set -- $pair
  for v in "--transport auto" "--transport nvlink --fuse never" "--transport nccl"; do
    two_processes "$OUT/rows.txt" --from $1 --to $2 --shape 16384x16384 --dtype f32 --buffers-change \
      --ranks-per-node 2 --iters 10 $v
  done
done
cat "$OUT/rows.txt" "$OUT/traces.txt"
if [ "${GPU_TESTS:-0}" = 1 ]; then
  start=$SECONDS
  build-device/tests/executor_gpu_tests > "$OUT/gpu_tests.log" 2>&1
  echo "executor_gpu_tests: exit $? in $((SECONDS - start)) s"
  grep -E "^\[  (PASSED|FAILED) |Failure|verified runs|wrong" "$OUT/gpu_tests.log" | tail -12
fi
archive_end

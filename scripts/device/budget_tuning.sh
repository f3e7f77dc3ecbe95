#!/usr/bin/env bash
# On the 2-GPU machine: memory-budgeted plans with stages on side streams (lanes) vs serial, NCCL's NVLink p2p
# chunk size, and the p2p reduction kernel (row-based) on Partial sources. Logs under $OUT.
set -uo pipefail
cd "$(dirname "$0")/../.."
source scripts/device/lib.sh
device_setup || exit 1
timeout 150 $T --gtest_filter='Gpu.Partial*:Gpu.MemoryBudget*:Gpu.EveryDType' > "$OUT/gpu_tests.log" 2>&1
grep -E "^\[  (PASSED|FAILED) |^\[       OK|GPU SUMMARY|Failure" "$OUT/gpu_tests.log" | head -20
for spec in "16384x16384 f32 32MiB" "16384x16384 bf16 16MiB" "8192x8192 f32 8MiB" "32768x16384 bf16 64MiB"; do
  set -- $spec
  bench "S0>S1 $1 $2 unlimited" --mesh 2 --from S0 --to S1 --shape $1 --dtype $2 --trace
  bench "S0>S1 $1 $2 budget $3 lanes" --mesh 2 --from S0 --to S1 --shape $1 --dtype $2 --memory-budget $3 --trace
  bench "S0>S1 $1 $2 budget $3 serial" --mesh 2 --from S0 --to S1 --shape $1 --dtype $2 --memory-budget $3 --stages serial --trace
done
NCCL_P2P_NVL_CHUNKSIZE=2097152 bench "S0>S1 16384x16384 f32 budget 32MiB serial nvlchunk2M" --mesh 2 --from S0 --to S1 --shape 16384x16384 --dtype f32 --memory-budget 32MiB --stages serial
NCCL_P2P_NVL_CHUNKSIZE=2097152 bench "S0>S1 16384x16384 f32 unlimited nvlchunk2M" --mesh 2 --from S0 --to S1 --shape 16384x16384 --dtype f32
for t in f32 bf16; do
  for s in collective p2p; do
    bench "P>S0 16384x16384 $t $s" --mesh 2 --from P --to S0 --shape 16384x16384 --dtype $t --strategy $s
    bench "P>S1 16384x16384 $t $s" --mesh 2 --from P --to S1 --shape 16384x16384 --dtype $t --strategy $s
    bench "P>R 16384x16384 $t $s" --mesh 2 --from P --to R --shape 16384x16384 --dtype $t --strategy $s
  done
  bench "P>S0 16384x16384 $t p2p chunk64MiB lanes" --mesh 2 --from P --to S0 --shape 16384x16384 --dtype $t --strategy p2p --pipeline-chunk 64MiB --trace
  bench "P>S0 16384x16384 $t p2p chunk64MiB serial" --mesh 2 --from P --to S0 --shape 16384x16384 --dtype $t --strategy p2p --pipeline-chunk 64MiB --stages serial
done

#!/usr/bin/env bash
# On the 2-GPU machine: build; the whole GPU suite (Partial and memory-budget tests
# included); compute-sanitizer memcheck (API errors inside NCCL not reported: NCCL probes kernel images and peer
# access and handles the errors itself) and racecheck on reshard's kernels over the light suite; the memory-budget
# and Partial benchmarks. Logs and CSVs under $OUT.
set -uo pipefail
cd "$(dirname "$0")/../.."
source scripts/device/lib.sh
device_setup || exit 1
echo "== GPU suite"
timeout 220 $T > "$OUT/gpu_tests.log" 2>&1
grep -E "^\[  (PASSED|FAILED) |^\[       OK|GPU SUMMARY|Failure" "$OUT/gpu_tests.log" | head -30
echo "== budget and partial benchmarks"
for spec in "16384x16384 f32 32MiB" "16384x16384 bf16 16MiB" "8192x8192 f32 8MiB" "32768x16384 bf16 64MiB"; do
  set -- $spec
  bench "S0>S1 $1 $2 unlimited" --mesh 2 --from S0 --to S1 --shape $1 --dtype $2
  bench "S0>S1 $1 $2 budget $3" --mesh 2 --from S0 --to S1 --shape $1 --dtype $2 --memory-budget $3
done
bench "P>S0 16384x16384 f32 unlimited" --mesh 2 --from P --to S0 --shape 16384x16384 --dtype f32
bench "P>S0 16384x16384 f32 budget 64MiB" --mesh 2 --from P --to S0 --shape 16384x16384 --dtype f32 --memory-budget 64MiB
for t in f32 bf16; do
  for s in collective p2p; do
    bench "P>S0 16384x16384 $t $s" --mesh 2 --from P --to S0 --shape 16384x16384 --dtype $t --strategy $s
    bench "P>S1 16384x16384 $t $s" --mesh 2 --from P --to S1 --shape 16384x16384 --dtype $t --strategy $s
    bench "P>R 16384x16384 $t $s" --mesh 2 --from P --to R --shape 16384x16384 --dtype $t --strategy $s
    bench "P(avg)>S0 8192x8192 $t $s" --mesh 2 --from "P(avg)" --to S0 --shape 8192x8192 --dtype $t --strategy $s
  done
done
echo "== compute-sanitizer"
FILTER='Gpu.EveryPair*:Gpu.EveryDType:Gpu.CudaGraph*:Gpu.ZeroCopy*:Gpu.HostPointers*:Gpu.Partial*:Gpu.MemoryBudget*'
sanitize "$T" "$FILTER"

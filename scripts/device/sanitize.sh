#!/usr/bin/env bash
# On the 2-GPU machine: compute-sanitizer memcheck and racecheck over the (light) GPU suite, on reshard's own
# kernels (batched copy, pattern fill and check: kernel names containing "reshard"), then the whole GPU suite.
set -uo pipefail
cd "$(dirname "$0")/../.."
export NCCL_NVLS_ENABLE=0 RESHARD_CLI="$PWD/build-device/tools/reshard"
OUT=${OUT:-/tmp}
bash scripts/device/build.sh || exit 1
T=build-device/tests/executor_gpu_tests
FILTER='Gpu.EveryPair*:Gpu.EveryDType:Gpu.CudaGraph*:Gpu.ZeroCopy*:Gpu.HostPointers*'
compute-sanitizer --version | head -2 > "$OUT/sanitizer.log"
for tool in memcheck racecheck; do
  echo "== $tool" >> "$OUT/sanitizer.log"
  RESHARD_GPU_TESTS_LIGHT=1 timeout 200 compute-sanitizer --tool $tool --kernel-name kns=reshard --error-exitcode 9 \
    $T --gtest_filter="$FILTER" >> "$OUT/sanitizer.log" 2>&1
  echo "exit $?" >> "$OUT/sanitizer.log"
done
grep -E "^== |ERROR SUMMARY|RACECHECK SUMMARY|exit |GPU SUMMARY|PASSED|FAILED" "$OUT/sanitizer.log"
timeout 240 $T > "$OUT/gpu_tests.log" 2>&1
grep -E "^\[  (PASSED|FAILED) |GPU SUMMARY|^fault|Failure" "$OUT/gpu_tests.log"

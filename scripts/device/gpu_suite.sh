#!/usr/bin/env bash
# On the 2-GPU machine, one call: the in-process GPU suite (every test, every element verified), then
# compute-sanitizer memcheck over the copy and fused kernels. Files under $OUT.
set -uo pipefail
cd "$(dirname "$0")/../.."
export NCCL_NVLS_ENABLE=0
OUT=${OUT:-/tmp}; T=build-device/tests/executor_gpu_tests
export RESHARD_CLI="$PWD/build-device/tools/reshard"
t0=$(date +%s); el() { echo $(( $(date +%s) - t0 )); }
bash scripts/device/build.sh -DCMAKE_CXX_FLAGS=-g > "$OUT/build.txt" 2>&1 || { tail -30 "$OUT/build.txt"; exit 1; }
echo "[$(el) s] built"
timeout ${GPU_TEST_S:-330} $T > "$OUT/gpu_tests.log" 2>&1; echo "gpu tests exit $?"
grep -E "^\[ +(OK|FAILED) \]|GPU SUMMARY|Failure" "$OUT/gpu_tests.log" | head -40
grep -E "^\[ RUN" "$OUT/gpu_tests.log" | tail -1
echo "[$(el) s] gpu tests"
if [ $(el) -lt ${SANITIZE_BEFORE_S:-430} ]; then
  RESHARD_GPU_TESTS_LIGHT=1 timeout ${SANITIZE_S:-150} compute-sanitizer --tool memcheck --kernel-name kns=reshard \
    --report-api-errors no --error-exitcode 9 $T --gtest_filter='Gpu.EveryDType' > "$OUT/sanitizer.log" 2>&1
  echo "memcheck exit $?"; grep -E "ERROR SUMMARY|PASSED|FAILED" "$OUT/sanitizer.log" | head -5
fi
echo "[$(el) s] done"

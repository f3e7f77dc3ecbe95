#!/usr/bin/env bash
# On a one-GPU machine (H100 or H200), one call: build; the NVLink transport with ranks sharing the GPU
# (tests/shared_gpu_test.cpp: ordering, copy-engine and kernel copies, fused kernels, eager and graph, every element
# checked); compute-sanitizer memcheck, racecheck and synccheck over reshard's kernels in it (light mode); the rest of
# the GPU suite's one-GPU tests. Three files under $OUT.
set -uo pipefail
cd "$(dirname "$0")/../.."
export NCCL_NVLS_ENABLE=0
OUT=${OUT:-/tmp}
t0=$(date +%s); el() { echo $(( $(date +%s) - t0 )); }
bash scripts/device/build.sh > "$OUT/one_gpu.log" 2>&1 || { tail -40 "$OUT/one_gpu.log"; exit 1; }
{ date -u; nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv; } >> "$OUT/one_gpu.log" 2>&1
echo "[$(el) s] built"
S=build-device/tests/shared_gpu_tests
# The full suite and the three sanitizers (light mode) at once: the GPU has room, and device time is scarce.
limit=$(( ${BUDGET:-300} - $(el) - 10 ))
timeout $limit $S > "$OUT/shared_gpu.log" 2>&1 &
for tool in memcheck racecheck synccheck; do
  RESHARD_GPU_TESTS_LIGHT=1 timeout $limit compute-sanitizer --tool $tool --kernel-name kns=reshard \
    --report-api-errors no --error-exitcode 9 $S --gtest_filter='SharedGpu.EveryPair*:SharedGpu.Many*' \
    > /tmp/san_$tool.log 2>&1 &
done
wait
compute-sanitizer --version | head -2 > "$OUT/sanitizer.log"
for tool in memcheck racecheck synccheck; do echo "== $tool"; cat /tmp/san_$tool.log; done >> "$OUT/sanitizer.log"
grep -E "^\[ +(OK|FAILED|PASSED|SKIPPED) |^mesh|shared GPU:|Failure|wrong|error" "$OUT/shared_gpu.log" | head -40
grep -E "^== |^mesh|ERROR SUMMARY|RACECHECK SUMMARY|OK \]|PASSED|FAILED" "$OUT/sanitizer.log"
echo "[$(el) s] done"

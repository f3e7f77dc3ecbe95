#!/usr/bin/env bash
# On the 2-GPU machine: does the non-fused nvlink path rely on streams getting separate hardware queues? With
# CUDA_DEVICE_MAX_CONNECTIONS=1 every stream of a device shares one queue, so a wait that something queued behind it
# must satisfy deadlocks every time instead of now and then. Each variant (hang_probe.sh's) a few runs; then the
# in-process GPU suite and compute-sanitizer memcheck. Files under $OUT.
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:-/tmp}; T=build-device/tests/executor_gpu_tests
t0=$(date +%s); el() { echo $(( $(date +%s) - t0 )); }
N=${N:-3} WAIT=8 TIMEOUT_MS=3000 SKIP_TEST=1 PROBE_UNTIL_S=${PROBE_UNTIL_S:-280} CASES="--from S0 --to R --shape 256x256" \
  VARIANTS="${VARIANTS:-connections1 mp+connections1 kernelpull+connections1 base}" \
  bash scripts/device/hang_probe.sh
echo "[$(el) s] probes"
export NCCL_NVLS_ENABLE=0
timeout ${GPU_TEST_S:-170} $T > "$OUT/gpu_tests.log" 2>&1; echo "gpu tests exit $?"
grep -E "^\[  (PASSED|FAILED) |^\[  FAILED|GPU SUMMARY|Failure" "$OUT/gpu_tests.log" | head -20
grep -E "^\[ RUN" "$OUT/gpu_tests.log" | tail -1
echo "[$(el) s] gpu tests"
if [ $(el) -lt ${SANITIZE_BEFORE_S:-460} ]; then
  RESHARD_GPU_TESTS_LIGHT=1 timeout ${SANITIZE_S:-120} compute-sanitizer --tool memcheck --kernel-name kns=reshard \
    --report-api-errors no --error-exitcode 9 $T --gtest_filter='Gpu.EveryDType' > "$OUT/sanitizer.log" 2>&1
  echo "memcheck exit $?"; grep -E "ERROR SUMMARY|PASSED|FAILED" "$OUT/sanitizer.log" | head -5
fi
echo "[$(el) s] done"

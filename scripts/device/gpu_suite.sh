#!/usr/bin/env bash
# On the 2-GPU machine, one call: every GPU test binary (executor_gpu_tests: ranks as threads of this process and, in
# Gpu.OneProcessPerRank / Gpu.ARankProcessThatDies..., one process per rank; shared_gpu_tests; batch_gpu_tests),
# every element verified. The GpuProcesses.* tests (one process per GPU: every-pair sweep, stopped rank, stray
# connections, stale rendezvous file) are processes.sh's (FILTER overrides). Sanitizers are sanitize.sh's. Files
# under $OUT.
set -uo pipefail
cd "$(dirname "$0")/../.."
source scripts/device/lib.sh
device_begin || exit 1
echo "[$(el) s] built"
for bin in executor_gpu_tests:${GPU_TEST_S:-330} shared_gpu_tests:100 batch_gpu_tests:100; do
  name=${bin%%:*}
  filter=$([ "$name" = executor_gpu_tests ] && echo "${FILTER:--GpuProcesses.*}" || echo "*")
  timeout ${bin##*:} build-device/tests/$name --gtest_filter="$filter" > "$OUT/$name.log" 2>&1; echo "$name exit $?"
  grep -E "^\[ +(OK|FAILED) \]|GPU SUMMARY|Failure|^\[  PASSED" "$OUT/$name.log" | head -40
  grep -E "^\[ RUN" "$OUT/$name.log" | tail -1
  echo "[$(el) s] $name"
done

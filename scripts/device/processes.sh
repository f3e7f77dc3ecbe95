#!/usr/bin/env bash
# On the 2-GPU machine, one call: the one-process-per-GPU tests of executor_gpu_tests (GpuProcesses.*): every pair of
# R/S0/S1/P(sum) swept by two `reshard bench` processes, a rank stopped with SIGSTOP mid-run, stray connections and
# another job's rank at a tcp rendezvous, a stale rendezvous file. Files under $OUT.
set -uo pipefail
cd "$(dirname "$0")/../.."
source scripts/device/lib.sh
device_begin || exit 1
echo "[$(el) s] built"
timeout ${PROCESS_TEST_S:-480} build-device/tests/executor_gpu_tests --gtest_filter="${FILTER:-GpuProcesses.*}" \
  > "$OUT/processes.log" 2>&1
echo "executor_gpu_tests GpuProcesses.* exit $?"
grep -E "^\[ +(OK|FAILED) \]|Failure|one process per GPU|stray connections|stopped rank|^\[  PASSED" \
  "$OUT/processes.log" | cut -c1-400 | head -40
echo "[$(el) s] done"

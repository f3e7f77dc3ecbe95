#!/usr/bin/env bash
# On the 2-GPU machine, one call: executor_gpu_tests in three runs, every element verified: the executor over NCCL
# (ranks as threads of this process: Gpu.*, GpuNccl.* and Backend/ExecutorOn.*/nccl, the checks every backend runs;
# one process per rank in Gpu.OneProcessPerRank / Gpu.ARankProcessThatDies...; FILTER overrides this run's filter),
# ranks sharing the GPUs (SharedGpu.*) and batches (GpuBatch.*). The GpuProcesses.* tests (one process per GPU:
# every-pair sweep, stopped rank, stray connections, stale rendezvous file) are processes.sh's; the dtype conversion
# tests (*GpuConverting*) run by hand. Sanitizers are sanitize.sh's. Files under $OUT.
set -uo pipefail
cd "$(dirname "$0")/../.."
source scripts/device/lib.sh
device_begin || exit 1
echo "[$(el) s] built"
# gpu_tests LABEL FILTER SECONDS: executor_gpu_tests --gtest_filter=FILTER into $OUT/LABEL.log; its exit status,
# results and GPU SUMMARY line.
gpu_tests() {
  local label=$1 filter=$2 seconds=$3
  timeout "$seconds" build-device/tests/executor_gpu_tests --gtest_filter="$filter" > "$OUT/$label.log" 2>&1
  echo "$label exit $?"
  grep -E "^\[ +(OK|FAILED) \]|GPU SUMMARY|Failure|^\[  PASSED" "$OUT/$label.log" | head -40
  grep -E "^\[ RUN" "$OUT/$label.log" | tail -1
  echo "[$(el) s] $label"
}
gpu_tests executor_gpu "${FILTER:--GpuProcesses.*:SharedGpu.*:GpuBatch.*:*GpuConverting*}" "${GPU_TEST_S:-330}"
gpu_tests shared_gpu "SharedGpu.*" 100
gpu_tests batch_gpu "GpuBatch.*" 100

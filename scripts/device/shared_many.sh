#!/usr/bin/env bash
# SharedGpu.ManyIterationsEagerAndGraph (ranks sharing 2 GPUs, 300 runs eager and from CUDA graphs) with every run
# printed, with the harness's 10 calls per graph and with 1 (RESHARD_TEST_GRAPH_CALLS=1): which run stalls, if any.
set -uo pipefail
cd "$(dirname "$0")/../.."
source scripts/device/lib.sh
device_begin || exit 1
echo "[$(el) s] built"
export CUDA_VISIBLE_DEVICES=0,1
for calls in 10 1; do
  RESHARD_TEST_GRAPH_CALLS=$calls RESHARD_TEST_VERBOSE=1 timeout ${T_S:-45} build-device/tests/shared_gpu_tests \
    --gtest_filter='*ManyIterations*:*CopyEngineAndKernelRows*' > "$OUT/shared_$calls.log" 2>&1
  echo "graph calls $calls: exit $?"; grep -E "^\[ +(OK|FAILED) \]|Failure" "$OUT/shared_$calls.log" | head -5
  grep -E "check:" "$OUT/shared_$calls.log" | tail -2
  echo "[$(el) s]"
done

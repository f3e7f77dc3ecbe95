#!/usr/bin/env bash
# On a one-GPU machine (H100 or H200), one call: build; the NVLink transport with ranks sharing the GPU
# (executor_gpu_tests' SharedGpu.*, tests/executor/gpu/shared_gpu_test.cpp: ordering, copy-engine and kernel copies,
# fused kernels, eager and graph, every element checked; FILTER overrides); PY=1 adds the Python checks that run in
# one process. Files under $OUT. (compute-sanitizer over ranks sharing a GPU stalls: sanitize on 2 GPUs.)
set -uo pipefail
cd "$(dirname "$0")/../.."
export NCCL_NVLS_ENABLE=0
OUT=${OUT:-/tmp}
t0=$(date +%s); el() { echo $(( $(date +%s) - t0 )); }
bash scripts/device/build.sh > "$OUT/one_gpu.log" 2>&1 || { tail -40 "$OUT/one_gpu.log"; exit 1; }
{ date -u; nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv; } >> "$OUT/one_gpu.log" 2>&1
echo "[$(el) s] built"
S=build-device/tests/executor_gpu_tests
timeout $(( ${BUDGET:-300} - $(el) - 5 )) $S --gtest_also_run_disabled_tests --gtest_filter="${FILTER:-SharedGpu.*}" > "$OUT/shared_gpu.log" 2>&1; echo "shared gpu tests exit $?"
grep -E "^\[ +(OK|FAILED|PASSED|SKIPPED) |^mesh|shared GPU:|Failure|wrong|error" "$OUT/shared_gpu.log" | head -40
# PY=1: the Python GPU checks that run on one process (torchrun --nproc-per-node 1).
if [[ "${PY:-0}" == 1 ]]; then
  export PYTHONPATH="$PWD/build-device/python${PYTHONPATH:+:$PYTHONPATH}"
  timeout $(( ${BUDGET:-300} - $(el) - 5 )) torchrun --nproc-per-node 1 python/tests/gpu/check_block_scaled.py \
    --out "$OUT" > "$OUT/block_scaled.log" 2>&1; echo "check_block_scaled.py (1 process) exit $?"
  grep -E "FAIL|checks passed|Error|error" "$OUT/block_scaled.log" | head -20
fi
echo "[$(el) s] done"

#!/usr/bin/env bash
# On the GPU machine, after build.sh: the GPU executor suite and the acceptance run; logs under $OUT.
set -uo pipefail
cd "$(dirname "$0")/../.."
export NCCL_NVLS_ENABLE=0 RESHARD_CLI="$PWD/build-device/tools/reshard"
OUT=${OUT:-/tmp}
{
  date -u; nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv; nvidia-smi topo -m
  python3 -c 'import torch; print("torch", torch.__version__, "nccl", torch.cuda.nccl.version())' 2>/dev/null
} > "$OUT/machine.txt" 2>&1
build-device/tests/executor_gpu_tests 2>&1 | tee "$OUT/gpu_tests.log" | grep -E "^\[  (PASSED|FAILED|  OK|SKIPPED) |GPU SUMMARY|1 GiB|Failure|error" | head -80
build-device/tools/reshard run --mesh 2 --from S0 --to S1 --shape 16384x16384 --dtype f32 --backend nccl 2>&1 | tee "$OUT/acceptance.txt"

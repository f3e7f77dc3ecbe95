#!/usr/bin/env bash
# On the 2-GPU machine: the nvlink runs that died without output, under gdb (backtraces), the fused small-tensor path,
# compute-sanitizer over the nvlink GPU tests, then the GPU suite. Logs under $OUT.
set -uo pipefail
cd "$(dirname "$0")/../.."
source scripts/device/lib.sh
t0=$(date +%s); stamp() { echo "[$(( $(date +%s) - t0 )) s] $*"; }
export NCCL_NVLS_ENABLE=0
OUT=${OUT:-/tmp}; R=build-device/tools/reshard; T=build-device/tests/executor_gpu_tests
export RESHARD_CLI="$PWD/$R"
bash scripts/device/build.sh -DCMAKE_CXX_FLAGS=-g -DCMAKE_CUDA_FLAGS=-lineinfo || exit 1
stamp built
DBG=""; command -v gdb >/dev/null && DBG=gdb; [ -z "$DBG" ] && [ -x /usr/local/cuda/bin/cuda-gdb ] && DBG=/usr/local/cuda/bin/cuda-gdb
echo "debugger: ${DBG:-none}"
n=0
case_() {  # case_ FLAGS...: run once plainly; on failure again under the debugger for a backtrace
  n=$((n+1)); local log="$OUT/case$n.log"
  echo "== case $n: $*" | tee -a "$OUT/cases.txt"
  timeout 90 $R run --backend nccl "$@" > "$log" 2>&1; local rc=$?
  echo "rc=$rc" | tee -a "$OUT/cases.txt"; grep -vE "^#" "$log" | tail -4 | tee -a "$OUT/cases.txt"
  if [ $rc -ne 0 ] && [ -n "$DBG" ]; then
    timeout 120 $DBG -q -batch -ex run -ex "thread apply all bt 20" --args $R run --backend nccl "$@" --iters 2 \
      > "$OUT/case$n.gdb" 2>&1
    grep -E "^#|signal|Thread .* hit|SIG" "$OUT/case$n.gdb" | head -60 | tee -a "$OUT/cases.txt"
  fi
}
M="--mesh 2"
case_ $M --from S0 --to S1 --shape 16384x32768 --dtype bf16 --strategy p2p --transport nvlink --iters 20
case_ $M --from S0 --to S1 --shape 1024x1024 --dtype f32 --strategy p2p --transport nvlink --iters 100 --graph
case_ $M --from S0 --to S1 --shape 16384x16384 --dtype f32 --iters 20
case_ $M --from P --to S0 --shape 16384x16384 --dtype f32 --strategy p2p --transport nvlink --iters 20
for f in never always auto; do
  case_ $M --from S0 --to S1 --shape 1024x1024 --dtype f32 --strategy p2p --transport nvlink --fuse $f --iters 200
  case_ $M --from S0 --to R --shape 256x256 --dtype f32 --strategy p2p --transport nvlink --fuse $f --iters 200
  case_ $M --from S0 --to S1 --shape 64x64 --dtype f32 --strategy p2p --transport nvlink --fuse $f --iters 200
done
case_ $M --from S0 --to S1 --shape 1024x1024 --dtype f32 --strategy p2p --transport nvlink --fuse always --iters 200 --graph
case_ $M --from S0 --to S1 --shape 1024x1024 --dtype f32 --strategy p2p --transport nccl --iters 200 --graph
case_ $M --from S0 --to S1 --shape 16384x16384 --dtype f32 --strategy p2p --transport nvlink --fuse always --iters 20
stamp cases
timeout ${GPU_TEST_S:-240} $T > "$OUT/gpu_tests.log" 2>&1; echo "gpu tests exit $?"
grep -E "^\[  (PASSED|FAILED) |^\[  FAILED|^\[       OK|GPU SUMMARY|Failure|error:" "$OUT/gpu_tests.log" | head -40
if ! grep -q "PASSED" "$OUT/gpu_tests.log" && [ -n "$DBG" ]; then
  timeout 150 $DBG -q -batch -ex run -ex "thread apply all bt 20" --args $T --gtest_filter='Gpu.EveryPair*' \
    > "$OUT/gpu_tests.gdb" 2>&1
  grep -E "^#|signal|SIG|RUN|Failure" "$OUT/gpu_tests.gdb" | head -60
fi
stamp gpu tests
if [ $(( $(date +%s) - t0 )) -lt ${SANITIZE_BEFORE_S:-330} ]; then sanitize $T 'Gpu.EveryPair*:Gpu.EveryDType'; fi
stamp done

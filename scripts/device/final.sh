#!/usr/bin/env bash
# On the 2-GPU machine, one call: build; the nvlink runs that hung before (with a backtrace if one still does); the
# GPU test suite; nccl vs nvlink vs auto on the acceptance cases; PyTorch's redistribute on the same cases;
# compute-sanitizer over the fused kernel. Six files under $OUT (the device tool returns a few files only).
set -uo pipefail
cd "$(dirname "$0")/../.."
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
OUT=${OUT:-/tmp}; R=build-device/tools/reshard; T=build-device/tests/executor_gpu_tests
export RESHARD_CLI="$PWD/$R"
t0=$(date +%s); el() { echo $(( $(date +%s) - t0 )); }
bash scripts/device/build.sh -DCMAKE_CXX_FLAGS=-g > "$OUT/crash.txt" 2>&1 || { cat "$OUT/crash.txt"; exit 1; }
{ date -u; nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv; nvidia-smi topo -m
  python3 -c 'import torch; print("torch", torch.__version__, "nccl", torch.cuda.nccl.version())'; } > "$OUT/machine.txt" 2>&1
echo "[$(el) s] built"
hung=0
probe() {
  echo "== $*" >> "$OUT/crash.txt"
  timeout 30 $R run --backend nccl --mesh 2 --iters 20 --timeout-ms 15000 "$@" 2>&1 | grep -vE "^# (algbw|reshard run|time per)" >> "$OUT/crash.txt"
  local rc=${PIPESTATUS[0]}; echo "rc=$rc" >> "$OUT/crash.txt"
  if [ $rc -ne 0 ] && [ $hung -eq 0 ] && command -v gdb > /dev/null; then
    hung=1
    timeout 45 gdb -q -batch -ex run -ex "thread apply all bt 12" --args $R run --backend nccl --mesh 2 --iters 20 "$@" 2>&1 \
      | grep -E "^#|SIG" | grep -v "in ?? ()" | head -60 >> "$OUT/crash.txt"
  fi
}
probe --from S0 --to S1 --shape 1024x1024 --strategy p2p --transport nvlink --fuse never
probe --from S0 --to R --shape 256x256 --strategy p2p --transport nvlink --fuse never
probe --from S0 --to S1 --shape 16384x16384
probe --from S0 --to S1 --shape 1024x1024 --strategy p2p --transport nvlink --fuse never --graph
grep -E "^==|^rc=|^  2 " "$OUT/crash.txt"
echo "[$(el) s] probes"
timeout ${GPU_TEST_S:-200} $T > "$OUT/gpu_tests.log" 2>&1; echo "gpu tests exit $?"
grep -E "^\[  (PASSED|FAILED) |^\[  FAILED|GPU SUMMARY|Failure" "$OUT/gpu_tests.log" | head -30
echo "[$(el) s] gpu tests"
b() { timeout 40 $R run --backend nccl --mesh 2 "$@" 2>&1 | grep -E "^  2 |error" | sed "s|\$|   [$*]|" >> "$OUT/bench.txt"; }
L="--shape 16384x16384 --iters 20"
for pair in "S0 S1" "S1 S0" "S0 R" "R S0" "P S0"; do set -- $pair
  for tr in nccl nvlink; do b --from $1 --to $2 $L --strategy p2p --transport $tr; done
  b --from $1 --to $2 $L
done
b --from S0 --to S1 --shape 16384x32768 --dtype bf16 --iters 20 --strategy p2p --transport nccl
b --from S0 --to S1 --shape 16384x32768 --dtype bf16 --iters 20
for s in 1024x1024 256x256 64x64; do
  b --from S0 --to S1 --shape $s --iters 300 --strategy p2p --transport nccl
  b --from S0 --to S1 --shape $s --iters 300 --strategy collective
  b --from S0 --to S1 --shape $s --iters 300 --strategy p2p --transport nvlink --fuse never
  b --from S0 --to S1 --shape $s --iters 300
  b --from S0 --to S1 --shape $s --iters 300 --graph
done
cat "$OUT/bench.txt"
echo "[$(el) s] bench"
{ echo "== overlap: 1 GiB S0->S1 beside bf16 8192^3 GEMMs"
  timeout 100 $R overlap --mesh 2 --from S0 --to S1 --shape 16384x16384 --strategy p2p --transports nvlink,nccl \
    --gemm 8192x8192x8192:bf16 --repeats 5 2>&1; echo "overlap exit $?"; } | tee -a "$OUT/bench.txt"
echo "[$(el) s] overlap"
python3 - "$OUT/cases.json" <<'PY'
import json, sys
c = [dict(mesh=[2], **{"from": f, "to": t}, shape=s, dtype=d) for f, t, s, d in [
    ("S0", "S1", [16384, 16384], "f32"), ("S1", "S0", [16384, 16384], "f32"), ("S0", "R", [16384, 16384], "f32"),
    ("R", "S0", [16384, 16384], "f32"), ("P", "S0", [16384, 16384], "f32"), ("S0", "S1", [16384, 32768], "bf16"),
    ("S0", "S1", [1024, 1024], "f32"), ("S0", "S1", [256, 256], "f32"), ("S0", "S1", [64, 64], "f32")]]
json.dump(c, open(sys.argv[1], "w"))
PY
timeout 150 torchrun --nproc-per-node 2 bench/pytorch_baseline.py --cases "$OUT/cases.json" --out "$OUT/pytorch.json" \
  > /tmp/pytorch.log 2>&1; echo "pytorch exit $?"; grep -iE "error|Traceback" /tmp/pytorch.log | head -3; rm -f "$OUT/cases.json"
grep "^pytorch " /tmp/pytorch.log
echo "[$(el) s] pytorch"
if [ $(el) -lt ${SANITIZE_BEFORE_S:-430} ]; then
  RESHARD_GPU_TESTS_LIGHT=1 timeout ${SANITIZE_S:-120} compute-sanitizer --tool memcheck --kernel-name kns=reshard --report-api-errors no \
    --error-exitcode 9 $T --gtest_filter='Gpu.EveryDType' > "$OUT/sanitizer.log" 2>&1; echo "memcheck exit $?"
  grep -E "ERROR SUMMARY|PASSED|FAILED" "$OUT/sanitizer.log" | head -5
fi
echo "[$(el) s] done"

#!/usr/bin/env bash
# On the 2-GPU machine, in one call: build, GPU tests, calibration, the benchmark sweep (priced with the calibrated
# profile), the PyTorch baseline on the same cases, and per-step traces. Everything lands in $OUT.
set -uo pipefail
cd "$(dirname "$0")/../.."
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
OUT=${OUT:-/tmp}
R=build-device/tools/reshard
t0=$(date +%s)
stamp() { echo "[$(( $(date +%s) - t0 )) s] $*"; }
bash scripts/device/build.sh || exit 1
stamp built
{ date -u; nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv; nvidia-smi topo -m
  python3 -c 'import torch; print("torch", torch.__version__, "nccl", torch.cuda.nccl.version())'; nvcc --version | tail -1
} > "$OUT/machine.txt" 2>&1
RESHARD_CLI=$PWD/$R timeout 240 build-device/tests/executor_gpu_tests > "$OUT/gpu_tests.log" 2>&1
grep -E "^\[  (PASSED|FAILED) |GPU SUMMARY" "$OUT/gpu_tests.log"
stamp gpu tests
timeout 120 $R calibrate --out "$OUT/h200x2.json" 2>&1 | tee "$OUT/calibrate.log"
stamp calibrated
PROFILE="$OUT/h200x2.json"; [ -s "$PROFILE" ] || PROFILE=""
timeout 240 $R bench ${PROFILE:+--profile $PROFILE} --csv "$OUT/sweep.csv" \
  --cases "$OUT/cases.json" > "$OUT/sweep.log" 2>&1; rm -f "$OUT/sweep.json"
tail -2 "$OUT/sweep.log"
stamp swept
timeout 200 torchrun --nproc-per-node 2 bench/pytorch_baseline.py --cases "$OUT/cases.json" --out "$OUT/pytorch.json" \
  > "$OUT/pytorch.log" 2>&1
tail -2 "$OUT/pytorch.log"
stamp pytorch
{
for chunk in 0 16MiB 64MiB; do
  $R run --mesh 2 --from S0 --to S1 --shape 16384x16384 --backend nccl --strategy p2p --iters 10 --trace --pipeline-chunk $chunk ${PROFILE:+--profile $PROFILE} | sed -n '4,5p'
done
$R run --mesh 2 --from S0 --to R --shape 16384x16384 --backend nccl --strategy p2p --iters 10 --trace | sed -n '4,5p'
for extra in "" "--graph"; do
  $R run --mesh 2 --from S0 --to S1 --shape 1024x1024 --backend nccl --iters 50 --trace $extra ${PROFILE:+--profile $PROFILE} | sed -n '4,5p'
  $R run --mesh 2 --from S0 --to S1 --shape 1024x1024 --backend nccl --iters 50 --trace --strategy collective $extra | sed -n '4,6p'
done
} > "$OUT/traces.txt" 2>&1
cat "$OUT/traces.txt"
stamp traces
tar czf "$OUT/logs.tar.gz" -C "$OUT" gpu_tests.log sweep.log pytorch.log calibrate.log cases.json machine.txt 2>/dev/null
rm -f "$OUT/cases.json" "$OUT/pytorch.log" "$OUT/calibrate.log" "$OUT/sweep.log"
ls -la "$OUT"

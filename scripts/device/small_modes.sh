#!/usr/bin/env bash
# Issue 14 on a 4-GPU machine, one call: the <= 4 MiB sweeps on meshes (2), (4) and (2,2) (every pair of R/S0/S1, every
# strategy and transport, auto marked, eager and CUDA-graph medians per call, the host's issue time per call) run two
# ways: ranks as threads of one process, and one process per GPU (as torchrun and PyTorch run); then PyTorch's
# redistribute on the same cases (torchrun, 2 and 4 processes). Identity pairs run in place. Every run verified.
# GPU_TESTS=1 first runs executor_gpu_tests on GPUs 0,1; PROCESSES=0 skips the one-process-per-GPU sweeps; CALIBRATE=1
# ends with `reshard calibrate` on GPUs 0,1 ($OUT/profile.json).
set -uo pipefail
cd "$(dirname "$0")/../.."
source scripts/device/lib.sh
archive_begin small_modes || exit 1
echo "$(nvidia-smi -L | wc -l) GPUs: $(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)"
if [ "${GPU_TESTS:-0}" = 1 ]; then
  CUDA_VISIBLE_DEVICES=0,1 timeout ${GPU_TEST_S:-230} build-device/tests/executor_gpu_tests > "$OUT/executor_gpu_tests.log" 2>&1
  echo "executor_gpu_tests exit $?"
  grep -E "^\[ +FAILED \]|GPU SUMMARY|Failure|^\[  PASSED" "$OUT/executor_gpu_tests.log" | cut -c1-300 | head -12
  echo "[$(el) s] executor_gpu_tests"
fi
SIZES=${SIZES:-4KiB,64KiB,256KiB,1MiB,4MiB}
FLAGS="--backend nccl --sizes $SIZES --dtypes f32 --placements R,S0,S1 --iters 100 --warmup 20"
for m in 2 4 2x2; do
  timeout 110 $R bench $FLAGS --meshes $m --csv "$OUT/small_$m.csv" --cases "$OUT/cases_$m.json" > "$OUT/small_$m.log" 2>&1
  echo "threads $m exit $?"; grep -E "wrong" "$OUT/small_$m.log" | tail -1
  echo "[$(el) s] threads $m"
done
# processes N MESHES: one `reshard bench` per GPU 0..N-1 (file rendezvous, one job token); rank 0 writes the CSV.
processes() {
  local n=$1 meshes=$2 rv="$OUT/rv_$RANDOM" token="small$RANDOM$$"
  for ((rk = 0; rk < n; rk++)); do
    local csv=""
    [ $rk = 0 ] && csv="--csv $OUT/proc_$n.csv"
    RESHARD_RENDEZVOUS_TOKEN=$token RANK=$rk LOCAL_RANK=$rk WORLD_SIZE=$n timeout 170 $R bench $FLAGS \
      --meshes $meshes --rendezvous file:$rv $csv > "$OUT/proc_${n}_$rk.log" 2>&1 &
  done
  wait; rm -f "$rv"
  echo "processes $n ($meshes): $(grep -hE "wrong" "$OUT"/proc_${n}_0.log | tail -1)"; grep -hiE "error" "$OUT"/proc_${n}_*.log | head -3
  echo "[$(el) s] processes $n"
}
if [ "${PROCESSES:-1}" = 1 ]; then
  processes 2 2
  processes 4 4,2x2
fi
python3 - "$OUT" <<'PY'
import json, sys
out = sys.argv[1]
json.dump(json.load(open(f"{out}/cases_4.json")) + json.load(open(f"{out}/cases_2x2.json")), open(f"{out}/cases_x4.json", "w"))
PY
for m in 2 4; do
  c=$([ $m = 2 ] && echo cases_2.json || echo cases_x4.json)
  timeout $(( ($(left) - ${CALIBRATE_S:-20}) / (m == 2 ? 3 : 1) )) torchrun --nproc-per-node $m bench/pytorch_baseline.py \
    --cases "$OUT/$c" --out "$OUT/pytorch_$m.json" > "$OUT/pytorch_$m.log" 2>&1
  echo "pytorch on $m exit $?"; grep -iE "Traceback|error" "$OUT/pytorch_$m.log" | head -3
  echo "[$(el) s] pytorch $m"
done
if [ "${CALIBRATE:-0}" = 1 ]; then
  CUDA_VISIBLE_DEVICES=0,1 timeout $(( $(left) - 10 )) $R calibrate --out "$OUT/profile.json" > "$OUT/calibrate.log" 2>&1
  echo "calibrate exit $?"; grep -E "nvlink|fused|step_overhead" "$OUT/calibrate.log" | tail -6
fi
archive_end

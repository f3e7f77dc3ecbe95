#!/usr/bin/env bash
# Issue 14 (small tensors at the latency floor) on a 4-GPU machine, one call: build; the <= 4 MiB sweeps on meshes (2),
# (4) and (2,2) (every pair of R/S0/S1, every strategy and transport, auto marked, eager and CUDA-graph medians per
# call; ranks as threads of one process), PyTorch's redistribute on the same cases (torchrun, 2 and 4 processes), and
# `reshard calibrate` on GPUs 0,1 (the fused line after the kernel changes). Every reshard run verified. One archive.
set -uo pipefail
cd "$(dirname "$0")/../.."
source scripts/device/lib.sh
archive_begin small_x4 || exit 1
echo "$(nvidia-smi -L | wc -l) GPUs: $(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)"
SIZES=${SIZES:-4KiB,64KiB,256KiB,1MiB,4MiB}
for m in 2 4 2x2; do
  timeout 110 $R bench --backend nccl --meshes $m --sizes $SIZES --dtypes f32 --placements R,S0,S1 --iters 100 \
    --warmup 20 --csv "$OUT/small_$m.csv" --cases "$OUT/cases_$m.json" > "$OUT/small_$m.log" 2>&1
  echo "sweep $m exit $?"; grep -E "wrong" "$OUT/small_$m.log" | tail -1
  echo "[$(el) s] sweep $m"
done
python3 - "$OUT" <<'PY'
import json, sys
out = sys.argv[1]
json.dump(json.load(open(f"{out}/cases_4.json")) + json.load(open(f"{out}/cases_2x2.json")), open(f"{out}/cases_x4.json", "w"))
PY
for m in 2 4; do
  c=$([ $m = 2 ] && echo cases_2.json || echo cases_x4.json)
  timeout $(( ($(left) - 30) / (m == 2 ? 3 : 2) )) torchrun --nproc-per-node $m bench/pytorch_baseline.py \
    --cases "$OUT/$c" --out "$OUT/pytorch_$m.json" > "$OUT/pytorch_$m.log" 2>&1
  echo "pytorch on $m exit $?"; grep -iE "Traceback|error" "$OUT/pytorch_$m.log" | head -3
  echo "[$(el) s] pytorch $m"
done
CUDA_VISIBLE_DEVICES=0,1 timeout $(( $(left) - 10 )) $R calibrate --out "$OUT/profile.json" > "$OUT/calibrate.log" 2>&1
echo "calibrate exit $?"; grep -E "nvlink|step_overhead" "$OUT/calibrate.log" | tail -4
archive_end

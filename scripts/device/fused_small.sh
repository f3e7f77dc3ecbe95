#!/usr/bin/env bash
# Issue 14 on 2 GPUs: small tensors after the fused kernel lost its system-scope fences. The <= 4 MiB sweep on mesh (2)
# (every pair of R/S0/S1, every strategy and transport, auto marked, CUDA-graph replays of auto's plan), with the
# built-in profile; `reshard calibrate` (the fused fit moves with the kernel); the same sweep with the calibrated
# profile; PyTorch's redistribute on the same cases. Every reshard run verified. One archive under $OUT.
set -uo pipefail
cd "$(dirname "$0")/../.."
source scripts/device/lib.sh
archive_begin fused_small || exit 1
SIZES=${SIZES:-4KiB,64KiB,256KiB,1MiB,4MiB}
sweep() {  # sweep NAME [profile flags]
  local name=$1; shift
  timeout 100 $R bench --backend nccl --meshes 2 --sizes $SIZES --dtypes f32 --placements R,S0,S1 --iters 100 \
    --warmup 20 "$@" --csv "$OUT/small_$name.csv" --cases "$OUT/cases.json" > "$OUT/small_$name.log" 2>&1
  echo "sweep $name exit $?"; grep -E "wrong" "$OUT/small_$name.log" | tail -1
  grep -E "^  2 .*\*" "$OUT/small_$name.log" | head -45
  echo "[$(el) s] sweep $name"
}
sweep builtin
timeout ${CALIBRATE_S:-170} $R calibrate --out "$OUT/profile.json" > "$OUT/calibrate.log" 2>&1
echo "calibrate exit $?"; grep -vE "^\[" "$OUT/calibrate.log" | tail -14
echo "[$(el) s] calibrated"
[ -s "$OUT/profile.json" ] && sweep calibrated --profile "$OUT/profile.json"
timeout $(( $(left) - 10 )) torchrun --nproc-per-node 2 bench/pytorch_baseline.py --cases "$OUT/cases.json" \
  --out "$OUT/pytorch.json" > "$OUT/pytorch.log" 2>&1
echo "pytorch exit $?"; grep -iE "Traceback|error" "$OUT/pytorch.log" | head -3; tail -3 "$OUT/pytorch.log"
archive_end

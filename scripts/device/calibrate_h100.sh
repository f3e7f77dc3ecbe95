#!/usr/bin/env bash
# `reshard calibrate` on the 2-GPU machine (NCCL links, copy kernel, step overhead and, since 2026-11-26, the nvlink
# fields), then the mesh (2) sweep at 256 KiB-256 MiB f32 (every pair of R/S0/S1, every strategy and transport, auto's
# choice marked) with the built-in profile and with the calibrated one. Every run verified. One archive under $OUT.
set -uo pipefail
cd "$(dirname "$0")/../.."
source scripts/device/lib.sh
archive_begin calibrate_h100 || exit 1
timeout ${CALIBRATE_S:-150} $R calibrate --out "$OUT/profile.json" > "$OUT/calibrate.log" 2>&1
echo "calibrate exit $?"; grep -vE "^\[" "$OUT/calibrate.log" | tail -14
echo "[$(el) s] calibrated"
for p in builtin calibrated; do
  timeout 80 $R bench --backend nccl --meshes 2 --sizes 256KiB,4MiB,64MiB,256MiB --dtypes f32 --iters 30 --warmup 5 \
    $([ $p = calibrated ] && echo "--profile $OUT/profile.json") --csv "$OUT/sweep_$p.csv" > "$OUT/sweep_$p.log" 2>&1
  echo "sweep $p exit $?"; grep -E "wrong" "$OUT/sweep_$p.log" | tail -1
  echo "[$(el) s] $p"
done
archive_end

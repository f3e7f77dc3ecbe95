#!/usr/bin/env bash
# `reshard calibrate` on the 2-GPU machine (NCCL links, copy kernel, step overhead and the nvlink fields), then the
# mesh (2) sweep at 256 KiB-256 MiB f32 (every pair of R/S0/S1, every strategy and transport, auto's
# choice marked) with the built-in profile and with the calibrated one. Every run verified. One archive under $OUT.
set -uo pipefail
cd "$(dirname "$0")/../.."
source scripts/device/lib.sh
archive_begin calibrate_h100 || exit 1
timeout ${CALIBRATE_S:-150} $R calibrate --out "$OUT/profile.json" > "$OUT/calibrate.log" 2>&1
echo "calibrate exit $?"; grep -vE "^\[" "$OUT/calibrate.log" | tail -14
echo "[$(el) s] calibrated"
sweep_mesh2 builtin
sweep_mesh2 calibrated "$OUT/profile.json"
archive_end

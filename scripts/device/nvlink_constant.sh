#!/usr/bin/env bash
# Where the per-call constant of unfused nvlink steps goes (issue 13: on 4x H100, 2026-11-26, S0->S1 ran +34/+39 us
# over the bound on mesh (2) at 256 MiB / 1 GiB and +59/+66 us on (4)). For meshes (2) and (4) (4 only with 4 GPUs)
# and 64 MiB, 256 MiB and 1 GiB bf16 S0->S1 and S0->R on the nvlink transport: the timed run and one traced run
# (--trace: each step's start, first and last communicating op), default and with RESHARD_FLAG_POSTS=write (direct
# flag writes between same-process peers instead of copy-engine copies). Every run verified. One archive under $OUT.
set -uo pipefail
cd "$(dirname "$0")/../.."
source scripts/device/lib.sh
archive_begin nvlink_constant || exit 1
gpus=$(nvidia-smi -L | wc -l)
for mesh in 2 4; do
  [ "$mesh" -le "$gpus" ] || continue
  for pair in "S0 S1" "S0 R"; do
    set -- $pair
    for shape in 4096x8192 8192x16384 16384x32768; do
      for posts in copy write; do
        RESHARD_FLAG_POSTS=$posts timeout 60 $R run --backend nccl --mesh $mesh --from $1 --to $2 --shape $shape \
          --dtype bf16 --strategy p2p --transport nvlink --fuse never --iters 30 --trace 2>&1 |
          grep -E "^  |^# step|verified|error" | sed "s|\$|   [mesh $mesh $1->$2 $shape posts=$posts]|"
      done
    done
  done
done | tee "$OUT/constant.txt"
archive_end

#!/usr/bin/env bash
# Small and mid-size nvlink calls on mesh (2) with flag posts as stream write-values (the default between ranks of one
# process since 2026-11-26) and as copy-engine copies (RESHARD_FLAG_POSTS=copy): S0->S1 and S0->R, f32 1024x1024
# (4 MiB) and bf16 8192x16384 (256 MiB), fused and separate, eager and graph replays; every run verified. Prints the
# result rows; one file $OUT/post_kinds.txt.
set -uo pipefail
cd "$(dirname "$0")/../.."
source scripts/device/lib.sh
device_begin || exit 1
for pair in "S0 S1" "S0 R"; do
  set -- $pair
  for case in "1024x1024 f32 always" "1024x1024 f32 never" "8192x16384 bf16 never"; do
    set -- $pair $case
    for graph in "" --graph; do
      for posts in write copy; do
        RESHARD_FLAG_POSTS=$posts timeout 60 $R run --backend nccl --mesh 2 --from $1 --to $2 --shape $3 --dtype $4 \
          --strategy p2p --transport nvlink --fuse $5 --iters 50 $graph 2>&1 |
          grep -E "^  |verified|error" | tr '\n' ' ' | sed "s|\$|   [$1->$2 $3 $4 fuse=$5 ${graph:-eager} posts=$posts]\n|"
      done
    done
  done
done | tee "$OUT/post_kinds.txt"

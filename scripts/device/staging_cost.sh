#!/usr/bin/env bash
# On the 2-GPU machine, one call: what staging costs (--buffers-change: a staged first step) against the same plan on
# fixed buffers, for mesh (2) S0->S1 f32 at 4 MiB and 64 MiB, fused and separate, with one traced run each (step
# phases). Every run verified. One archive under $OUT.
set -uo pipefail
cd "$(dirname "$0")/../.."
source scripts/device/lib.sh
archive_begin staging_cost || exit 1
for shape in 1024x1024 4096x4096; do
  for fuse in always never; do
    for mode in "" "--buffers-change"; do
      timeout 60 $R run --backend nccl --mesh 2 --from S0 --to S1 --shape $shape --dtype f32 --strategy p2p \
        --transport nvlink --fuse $fuse --iters 50 --trace $mode 2>&1 | grep -E "^  |^# step|verified|error" |
        sed "s|\$|   [$shape fuse=$fuse ${mode:-fixed}]|"
      timeout 60 $R plan --mesh 2 --from S0 --to S1 --shape $shape --dtype f32 --strategy p2p --transport nvlink \
        --fuse $fuse $mode --json > "$OUT/plan_${shape}_${fuse}${mode:+_staged}.json" 2>&1
    done
  done
done | tee "$OUT/staging.txt"
archive_end

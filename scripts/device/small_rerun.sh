#!/usr/bin/env bash
# Issue 14 on a 4-GPU machine, a second look at mesh (2,2): the <= 4 MiB sweep again with PyTorch in the same call, and
# the two cases whose eager median was 58 us in the first sweep (2x2 [R,S0]->[S1,S1] 1024^2 and [S0,R]->[R,S1] 128^2,
# fused p2p/nvlink, 10-19 us otherwise) run 8 times each as separate processes: whether the slow mode recurs. Verified.
set -uo pipefail
cd "$(dirname "$0")/../.."
source scripts/device/lib.sh
archive_begin small_rerun || exit 1
timeout 80 $R bench --backend nccl --meshes 2x2 --sizes 4KiB,64KiB,256KiB,1MiB,4MiB --dtypes f32 --placements R,S0,S1 \
  --iters 100 --warmup 20 --csv "$OUT/small_2x2.csv" --cases "$OUT/cases_2x2.json" > "$OUT/small_2x2.log" 2>&1
echo "sweep 2x2 exit $?"; grep -E "wrong" "$OUT/small_2x2.log" | tail -1
echo "[$(el) s] sweep"
for c in "--from R,S0 --to S1,S1 --shape 1024x1024" "--from S0,R --to R,S1 --shape 128x128"; do
  for i in 1 2 3 4 5 6 7 8; do
    timeout 20 $R run --backend nccl --mesh 2x2 $c --dtype f32 --strategy p2p --transport nvlink --iters 100 \
      --warmup 20 2>&1 | grep -E "^  " | tail -1 | sed "s|\$|   [$c, run $i]|"
  done
done | tee "$OUT/repeats.txt"
echo "[$(el) s] repeats"
timeout $(( $(left) - 10 )) torchrun --nproc-per-node 4 bench/pytorch_baseline.py --cases "$OUT/cases_2x2.json" \
  --out "$OUT/pytorch_4.json" > "$OUT/pytorch_4.log" 2>&1
echo "pytorch exit $?"; grep -iE "Traceback|error" "$OUT/pytorch_4.log" | head -3
archive_end

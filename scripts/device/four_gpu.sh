#!/usr/bin/env bash
# On the 4-GPU machine (nvidia-h200-x4), in one call: build; the benchmark sweep on meshes (4) and (2,2) with every
# pair of R, S0, S1 (among them [S0,S1]->[S1,S0], [S0,S0]->[S1,S1], [S0,R]->[R,S1], [R,S0]->[S1,R]), every run
# verified element by element, priced with the 2x H200 calibrated profile; PyTorch's redistribute on the same cases;
# Partial redistributions on (2,2). Everything lands in $OUT.
set -uo pipefail
cd "$(dirname "$0")/../.."
source scripts/device/lib.sh
P=bench/profiles/h200x2.json
t0=$(date +%s)
stamp() { echo "[$(( $(date +%s) - t0 )) s] $*"; }
device_setup || exit 1
stamp built
timeout 220 $R bench --meshes 4,2x2 --sizes 4MiB,64MiB,256MiB,1GiB --dtypes bf16 --profile $P \
  --csv "$OUT/sweep.csv" --cases "$OUT/cases.json" > "$OUT/sweep.log" 2>&1
tail -3 "$OUT/sweep.log"
stamp swept
timeout 170 torchrun --nproc-per-node 4 bench/pytorch_baseline.py --cases "$OUT/cases.json" --out "$OUT/pytorch.json" \
  > "$OUT/pytorch.log" 2>&1
tail -2 "$OUT/pytorch.log"
stamp pytorch
for spec in "P,P S0,S1" "P,S0 S1,R" "S0,S1 P,R" "P(avg),P(avg) S1,S0"; do
  set -- $spec
  for s in collective p2p hybrid; do
    bench "2x2 $1>$2 4096x4096 f32 $s" --mesh 2x2 --from "$1" --to "$2" --shape 4096x4096 --dtype f32 --strategy $s
  done
done
stamp partial
gzip -f "$OUT/sweep.log" "$OUT/pytorch.log"

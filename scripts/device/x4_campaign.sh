#!/usr/bin/env bash
# On a 4-GPU machine, one call (BUDGET seconds, default 575): the >= 256 MiB sweeps on meshes (2), (4), (2,2) in process
# against the bound from the copy-engine peer bandwidth measured at the start of each sweep; small tensors (<= 4 MiB)
# on (4) and (2,2), eager and graph columns; the cross-mesh runs (2,2)->(4) and (4)->(2); PyTorch's redistribute on
# the same cases. Every reshard run verified element by element. Files under $OUT.
set -uo pipefail
cd "$(dirname "$0")/../.."
source scripts/device/lib.sh
device_begin || exit 1
BUDGET=${BUDGET:-575}
left() { echo $((BUDGET - $(el))); }
echo "[$(el) s] built"
sweep() {  # sweep NAME SECONDS BENCH-FLAGS...
  local name=$1 t=$2; shift 2
  timeout $t $R bench --backend nccl "$@" --csv "$OUT/$name.csv" --cases "$OUT/$name.cases.json" > "$OUT/$name.log" 2>&1
  echo "$name exit $?"; grep -iE "link|bound|wrong" "$OUT/$name.log" | grep -v "^# mesh" | tail -4
  echo "[$(el) s] $name"
}
sweep big_mesh2 70 --meshes 2 --sizes 256MiB,1GiB --dtypes bf16 --iters 10 --warmup 2
sweep big_mesh4 80 --meshes 4 --sizes 256MiB,1GiB --dtypes bf16 --iters 10 --warmup 2
sweep big_2x2 150 --meshes 2x2 --sizes 256MiB,1GiB --dtypes bf16 --iters 8 --warmup 2
sweep small_4 45 --meshes 4 --sizes 4KiB,256KiB,4MiB --dtypes f32 --iters 100 --warmup 10
sweep small_2x2 80 --meshes 2x2 --sizes 4KiB,4MiB --dtypes f32 --iters 100 --warmup 10
for c in "--from-mesh 2x2 --to-mesh 4 --from S0,S1 --to S1" "--from-mesh 4 --to-mesh 2 --from S0 --to S1" \
         "--from-mesh 4 --to-mesh 2 --to-ranks 2,3 --from S1 --to R"; do
  for tr in nccl nvlink; do
    timeout 40 $R run --backend nccl --transport $tr $c --shape 16384x16384 --dtype bf16 --iters 20 2>&1 |
      grep -E "^  |verified|error" | tail -2 | sed "s|\$|   [$c --transport $tr]|"
  done
done | tee "$OUT/cross_mesh.txt"
echo "[$(el) s] cross-mesh"
python3 - "$OUT" <<'PY'
import json, sys, glob
cases = []
for f in sorted(glob.glob(sys.argv[1] + "/*.cases.json")):
    cases += json.load(open(f))
json.dump(cases, open(sys.argv[1] + "/all_cases.json", "w"))
print(len(cases), "cases for PyTorch")
PY
for m in 2 4; do
  python3 - "$OUT" $m <<'PY'
import json, sys
c = [x for x in json.load(open(sys.argv[1] + "/all_cases.json")) if (len(x["mesh"]) == 1 and x["mesh"][0] == int(sys.argv[2])) or (sys.argv[2] == "4" and len(x["mesh"]) == 2)]
json.dump(c, open(sys.argv[1] + f"/cases_{sys.argv[2]}.json", "w"))
PY
  timeout $(( $(left) / (m == 2 ? 2 : 1) )) torchrun --nproc-per-node $m bench/pytorch_baseline.py --cases "$OUT/cases_$m.json" \
    --out "$OUT/pytorch_$m.json" > "$OUT/pytorch_$m.log" 2>&1; echo "pytorch on $m exit $?"
  grep -iE "Traceback|error" "$OUT/pytorch_$m.log" | head -3
  echo "[$(el) s] pytorch $m"
done
echo "[$(el) s] python (4 processes)"
OUT="$OUT/python" NPROC=4 SKIP_BUILD=1 BUDGET=$(( $(left) - 10 )) bash python/gpu_tests/run_all.sh 2>&1 | tail -12
echo "[$(el) s] done"
# The device tool brings back a few files only: everything goes in one archive.
tar -C "$OUT" -czf /tmp/x4_campaign.tgz . && rm -rf "$OUT"/* && mv /tmp/x4_campaign.tgz "$OUT/"

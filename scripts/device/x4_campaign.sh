#!/usr/bin/env bash
# On a 4-GPU machine, one call (BUDGET seconds, default 575): the >= 256 MiB sweeps on meshes (2), (4), (2,2) in process
# against the bound from the copy-engine peer bandwidth measured at the start of each sweep, and on (4) and (2,2) one
# process per GPU; the acceptance case 2x2 [S0,S1]->[S1,S0] 16384^2 bf16 (auto, nvlink, nccl); small tensors (<= 4 MiB)
# on (4) and (2,2), eager and graph columns; the cross-mesh runs (2,2)->(4) and (4)->(2); PyTorch's redistribute on
# the same cases; then the Python checks on 4 processes with what is left. Every reshard run verified element by
# element. Files under $OUT, in one archive (the device tool brings back a few files only) unless ARCHIVE=0.
set -uo pipefail
cd "$(dirname "$0")/../.."
source scripts/device/lib.sh
device_begin || exit 1
echo "[$(el) s] built"
sweep() {  # sweep NAME SECONDS BENCH-FLAGS...
  local name=$1 t=$2; shift 2
  timeout $t $R bench --backend nccl "$@" --csv "$OUT/$name.csv" --cases "$OUT/$name.cases.json" > "$OUT/$name.log" 2>&1
  echo "$name exit $?"; grep -iE "link|bound|wrong" "$OUT/$name.log" | grep -v "^# mesh" | tail -4
  echo "[$(el) s] $name"
}
procs() {  # procs NAME SECONDS BENCH-FLAGS...: the same, one process per GPU (file rendezvous)
  local name=$1 t=$2; shift 2
  local rv="/tmp/rv_${name}_$$" token="x4$RANDOM$$"
  for r in 0 1 2 3; do
    RESHARD_RENDEZVOUS_TOKEN=$token RANK=$r LOCAL_RANK=$r WORLD_SIZE=4 timeout $t $R bench "$@" --rendezvous file:$rv \
      --csv "$OUT/$name.csv" > "$OUT/${name}_$r.log" 2>&1 &
  done
  wait; rm -f "$rv"
  echo "$name:"; grep -iE "link|wrong" "$OUT/${name}_0.log" | grep -v "^# mesh" | tail -3
  echo "[$(el) s] $name"
}
sweep big_mesh2 70 --meshes 2 --sizes 256MiB,1GiB --dtypes bf16 --iters 10 --warmup 2
sweep big_mesh4 80 --meshes 4 --sizes 256MiB,1GiB --dtypes bf16 --iters 10 --warmup 2
sweep big_2x2 150 --meshes 2x2 --sizes 256MiB,1GiB --dtypes bf16 --iters 8 --warmup 2
procs big_procs 120 --meshes 4,2x2 --sizes 1GiB --dtypes bf16 --strategies collective,p2p --iters 8 --warmup 2
for t in auto nvlink nccl; do
  extra=$([ $t = auto ] || echo "--strategy p2p --transport $t")
  timeout 60 $R run --backend nccl --mesh 2x2 --from S0,S1 --to S1,S0 --shape 16384x16384 --dtype bf16 --iters 20 \
    $extra 2>&1 | grep -E "^  |verified|error" | sed "s|\$|   [$t]|"
done | tee "$OUT/acceptance_2x2.txt"
echo "[$(el) s] acceptance 2x2"
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
out = sys.argv[1]
cases = [dict(mesh=[2, 2], shape=[16384, 16384], dtype="bf16", **{"from": "S0,S1", "to": "S1,S0"})]
for f in sorted(glob.glob(out + "/*.cases.json")):
    cases += json.load(open(f))
for m in (2, 4):
    mine = [c for c in cases if (c["mesh"] == [m]) or (m == 4 and len(c["mesh"]) == 2)]
    json.dump(mine, open(f"{out}/cases_{m}.json", "w"))
print(len(cases), "cases for PyTorch")
PY
for m in 2 4; do
  timeout $(( $(left) / (m == 2 ? 3 : 2) )) torchrun --nproc-per-node $m bench/pytorch_baseline.py \
    --cases "$OUT/cases_$m.json" --out "$OUT/pytorch_$m.json" > "$OUT/pytorch_$m.log" 2>&1
  echo "pytorch on $m exit $?"; grep -iE "Traceback|error" "$OUT/pytorch_$m.log" | head -3
  echo "[$(el) s] pytorch $m"
done
grep -E "pytorch \[2, 2\] S0,S1->S1,S0 \[16384, 16384\]" "$OUT/pytorch_4.log"
echo "[$(el) s] python (4 processes)"
OUT="$OUT/python" NPROC=4 SKIP_BUILD=1 BUDGET=$(( $(left) - 10 )) bash python/gpu_tests/run_all.sh 2>&1 | tail -12
echo "[$(el) s] done"
if [ "${ARCHIVE:-1}" = 1 ]; then
  tar -C "$OUT" -czf /tmp/x4_campaign.tgz . && rm -rf "${OUT:?}"/* && mv /tmp/x4_campaign.tgz "$OUT/"
fi

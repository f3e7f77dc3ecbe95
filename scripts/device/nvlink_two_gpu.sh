#!/usr/bin/env bash
# The NVLink transport's 2-GPU acceptance points in one call (issue 13), on the code as it is: the >= 256 MiB sweep
# on mesh (2) in process against the bound from the link measured at the sweep's start; one process per rank (file
# rendezvous) for S0->S1, S1->S0, S0->R, R->S0, P->S0 16384^2 f32 (auto and p2p/nvlink; rank 0's rows); PyTorch's
# redistribute on the same cases in the same call. Every reshard run verified. One archive under $OUT.
set -uo pipefail
cd "$(dirname "$0")/../.."
source scripts/device/lib.sh
archive_begin nvlink_two_gpu || exit 1
timeout 90 $R bench --backend nccl --meshes 2 --sizes 256MiB,1GiB --dtypes bf16 --iters 10 --warmup 2 \
  --csv "$OUT/big_mesh2.csv" --cases "$OUT/big_mesh2.cases.json" > "$OUT/big_mesh2.log" 2>&1
echo "sweep exit $?"; grep -iE "link|bound|wrong" "$OUT/big_mesh2.log" | grep -v "^# mesh" | tail -4
echo "[$(el) s] sweep"
b() { two_processes "$OUT/processes.txt" "$@"; tail -1 "$OUT/processes.txt"; }
for pair in "S0 S1" "S1 S0" "S0 R" "R S0" "P S0"; do set -- $pair
  b --from $1 --to $2 --shape 16384x16384 --iters 20
  b --from $1 --to $2 --shape 16384x16384 --iters 20 --strategy p2p --transport nvlink
done
echo "[$(el) s] processes"
python3 - "$OUT" <<'PY'
import json, sys
out = sys.argv[1]
cases = json.load(open(out + "/big_mesh2.cases.json"))
cases += [dict(mesh=[2], shape=[16384, 16384], dtype="f32", **{"from": f, "to": t})
          for f, t in [("S0", "S1"), ("S1", "S0"), ("S0", "R"), ("R", "S0"), ("P", "S0")]]
json.dump(cases, open(out + "/cases.json", "w"))
print(len(cases), "cases for PyTorch")
PY
timeout $(( $(left) - 15 )) torchrun --nproc-per-node 2 bench/pytorch_baseline.py --cases "$OUT/cases.json" \
  --out "$OUT/pytorch.json" > "$OUT/pytorch.log" 2>&1
echo "pytorch exit $?"; grep -iE "Traceback|error" "$OUT/pytorch.log" | head -3
grep "^pytorch \[2\] .*16384, 16384\] f32" "$OUT/pytorch.log"
archive_end

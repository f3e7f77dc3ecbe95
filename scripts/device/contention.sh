#!/usr/bin/env bash
# On the 2-GPU machine, one call (about 5-7 minutes): build, then a redistribution beside a bf16 8192^3 GEMM loop
# (docs/benchmarks.md, "Redistribution beside compute"), every run verified:
#   - `reshard contention`, p2p with the nvlink and the nccl transport, eager and replayed from CUDA graphs, S0 -> S1 f32
#     of 64 MiB, 256 MiB and 1 GiB (the 1 GiB case is the acceptance case);
#   - the same 1 GiB case planned by auto in low-SM mode (--low-sm), eager;
#   - PyTorch's DTensor redistribute beside the same GEMM (bench/pytorch_contention.py), same three sizes.
# SHAPES (default "16384x16384 8192x8192 4096x4096") and GRAPHS=0 (no graph runs) shorten the call.
# Files under $OUT: machine.txt, contention.txt (the tables and the log), smi_NAME.csv (SM clock, power and throttle
# reasons every 200 ms during each run) and contention_rows.jsonl (one JSON row per
# measurement, `reshard contention --json`'s fields; PyTorch's with strategy "pytorch"), which
#   /usr/bin/python3 bench/contention_report.py contention_rows.jsonl --out DIR
# turns into a table and the slowdown-vs-size plot.
set -uo pipefail
cd "$(dirname "$0")/../.."
source scripts/device/lib.sh
t0=$(date +%s); stamp() { echo "[$(( $(date +%s) - t0 )) s] $*"; }
device_setup > /tmp/contention_build.log 2>&1 || { cat /tmp/contention_build.log; exit 1; }
stamp built
rows=/tmp/contention_rows; rm -rf $rows; mkdir -p $rows
GEMM="--gemm 8192x8192x8192:bf16 --repeats 5 --iters 50"
BUDGET_S=${BUDGET_S:-480}  # the device call's limit is 500 s: nothing is started that could run past this
left() { echo $(( BUDGET_S - ($(date +%s) - t0) )); }
contention() {  # NAME FLAGS...: one `reshard contention` run, its JSON rows kept as $rows/NAME.json
  local name=$1; shift
  if [ "$(left)" -lt 150 ]; then echo "== skipped $name: $(left) s left, kept for PyTorch"; return; fi
  echo "== reshard contention $* $GEMM"
  smi_start "$OUT/smi_$name.csv"
  timeout 60 $R contention --mesh 2 --from S0 --to S1 $GEMM --json "$rows/$name.json" "$@" 2>&1
  echo "exit $?"
  smi_stop
  # SM clock and power of GPU 0 over the run (the GEMM alone and beside the redistribution both fall inside it)
  awk -F', ' '$2 == 0 { gsub(/ MHz| W/, ""); print $3, $5 }' "$OUT/smi_$name.csv" | sort -n |
    awk '{ c[NR] = $1; p += $2 } END { if (NR) printf "GPU 0 over the run: SM clock min %d median %d max %d MHz, mean power %.0f W (%d samples)\n", c[1], c[int((NR + 1) / 2)], c[NR], p / NR, NR }'
  stamp "$name"
}
{
  for shape in ${SHAPES:-16384x16384 8192x8192 4096x4096}; do
    contention "eager_$shape" --shape $shape --strategy p2p --transports nvlink,nccl
    [ "${GRAPHS:-1}" = 1 ] && contention "graph_$shape" --shape $shape --strategy p2p --transports nvlink,nccl --cuda-graph
  done
  contention low_sm_auto --shape 16384x16384 --low-sm
  python3 - "$rows/cases.json" <<'PY'
import json, sys
json.dump([{"mesh": [2], "from": "S0", "to": "S1", "shape": s, "dtype": "f32"}
           for s in ([16384, 16384], [8192, 8192], [4096, 4096])], open(sys.argv[1], "w"))
PY
  echo "== torchrun bench/pytorch_contention.py (same cases)"
  timeout $(( $(left) > 20 ? $(left) - 10 : 10 )) torchrun --nproc-per-node 2 bench/pytorch_contention.py --cases "$rows/cases.json" \
    --gemm 8192x8192x8192:bf16 --repeats 5 --iters 50 --out "$rows/pytorch.json" > /tmp/pytorch_contention.log 2>&1
  echo "exit $?"
  grep -E '^\{"strategy": "pytorch"' /tmp/pytorch_contention.log
  grep -iE "error|Traceback" /tmp/pytorch_contention.log | head -5
  stamp pytorch
} 2>&1 | tee "$OUT/contention.txt"
python3 - "$rows" "$OUT/contention_rows.jsonl" <<'PY'
import glob, json, os, sys
with open(sys.argv[2], "w") as out:
    for path in sorted(glob.glob(os.path.join(sys.argv[1], "*.json"))):
        if path.endswith("cases.json"):
            continue
        try:
            rows = json.load(open(path))["rows"]
        except (OSError, ValueError, KeyError) as e:
            print(f"{path}: no rows ({e})")
            continue
        for row in rows:
            out.write(json.dumps(dict(row, run=os.path.basename(path)[:-5])) + "\n")
PY
wc -l < "$OUT/contention_rows.jsonl" | sed 's/^/rows: /'
stamp done

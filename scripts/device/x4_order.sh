#!/usr/bin/env bash
# On a 4-GPU machine, one call (BUDGET seconds, default 575): what the issue order of peer copies (lowering.cpp
# issue_order) and the copy-engine/kernel row-width threshold do to the >= 256 MiB cases on (4) and (2,2), and the
# Python checks on 4 processes. Runs:
#   1. the >= 256 MiB sweeps on (4) and (2,2) in process (bound from the copy-engine peer bandwidth measured first);
#   2. (4) S0->S1, (2) S0->S1 and 2x2 [S0,S0]->[S1,S0] at 256 MiB bf16 on the nvlink transport with the default
#      profile and with copy_engine_min_row_bytes raised to 64 KiB (narrow rows on the copy kernel instead);
#   3. python/gpu_tests/run_all.sh redistribute and tp_mlp on 4 processes.
# Everything in one archive under $OUT.
set -uo pipefail
cd "$(dirname "$0")/../.."
source scripts/device/lib.sh
archive_begin x4_order || exit 1
sweep() {  # sweep NAME SECONDS BENCH-FLAGS...
  local name=$1 t=$2; shift 2
  timeout $t $R bench --backend nccl "$@" --csv "$OUT/$name.csv" > "$OUT/$name.log" 2>&1
  echo "$name exit $?"; grep -iE "link|wrong" "$OUT/$name.log" | grep -v "^# mesh" | tail -2
  echo "[$(el) s] $name"
}
sweep big_mesh4 80 --meshes 4 --sizes 256MiB,1GiB --dtypes bf16 --iters 10 --warmup 2
sweep big_2x2 150 --meshes 2x2 --sizes 256MiB,1GiB --dtypes bf16 --iters 8 --warmup 2
python3 - "$OUT/wide.json" <<'PY'
import json, sys
ab = lambda a, b: {"alpha_us": a, "bandwidth_GBps": b}
intra = {"p2p": ab(8, 360), "all_gather": ab(10, 360), "reduce_scatter": ab(10, 275), "all_reduce": ab(12, 360),
         "all_to_all": ab(10, 340)}
inter = {k: ab(25, 45) for k in intra}
json.dump({"schema": "reshard.profile/1", "name": "default, copy engines only for rows >= 64 KiB",
           "intra_node": intra, "inter_node": inter, "p2p_per_peer_us": 1.5, "step_overhead_us": 20.0,
           "copy": ab(3, 2100), "copy_engine": ab(4, 2100),
           "nvlink": {"copy_engine": ab(4, 380), "kernel": ab(4, 326), "sync_us": 8.0, "step_overhead_us": 12.0,
                      "copy_engine_min_row_bytes": 65536, "fused": ab(8, 300), "fused_overhead_us": 4.0}},
          open(sys.argv[1], "w"), indent=1)
PY
for c in "--mesh 4 --from S0 --to S1" "--mesh 2 --from S0 --to S1" "--mesh 2x2 --from S0,S0 --to S1,S0" \
         "--mesh 4 --from S0 --to R" "--mesh 2x2 --from S0,S1 --to S1,R"; do
  for p in default wide; do
    timeout 40 $R run --backend nccl --strategy p2p --transport nvlink $c --shape 16384x8192 --dtype bf16 --iters 30 \
      $([ $p = wide ] && echo "--profile $OUT/wide.json") 2>&1 | grep -E "^  |verified|error" | tail -2 |
      sed "s|\$|   [$c, $p]|"
  done
done | tee "$OUT/rows.txt"
echo "[$(el) s] rows"
OUT="$OUT/python" NPROC=4 PARTS="redistribute tp_mlp" SKIP_BUILD=1 BUDGET=$(( $(left) - 15 )) \
  bash python/gpu_tests/run_all.sh 2>&1 | tail -8
archive_end

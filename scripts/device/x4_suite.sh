#!/usr/bin/env bash
# On a 4-GPU machine (nvidia-h200-x4 or nvidia-h100-x4), one call, BUDGET seconds (default 575): build; the 2-GPU test
# binaries on GPUs 0,1 (executor_gpu_tests with the one-process-per-GPU tests, shared_gpu_tests with ranks sharing the
# two GPUs, batch_gpu_tests); then the 4-GPU suite through `reshard bench`: every pair of R/S0/S1/P(sum) on meshes (4)
# and (2,2), sizes 0, 1, uneven, every strategy and transport (fused and separate nvlink copies as auto picks them),
# every element of every rank verified, first in process, then one process per GPU (file rendezvous). SKIP_2GPU=1: the
# 4-GPU suite only. Files under $OUT.
set -uo pipefail
cd "$(dirname "$0")/../.."
source scripts/device/lib.sh
device_begin || exit 1
echo "[$(el) s] built; $(nvidia-smi -L | wc -l) GPUs: $(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)"
if [ "${SKIP_2GPU:-0}" != 1 ]; then
export CUDA_VISIBLE_DEVICES=0,1
timeout ${GPU_TEST_S:-230} build-device/tests/executor_gpu_tests > "$OUT/executor_gpu_tests.log" 2>&1
echo "executor_gpu_tests exit $?"
grep -E "^\[ +(OK|FAILED) \]|GPU SUMMARY|Failure|^\[  PASSED" "$OUT/executor_gpu_tests.log" | cut -c1-300 | head -30
grep -E "^\[ RUN" "$OUT/executor_gpu_tests.log" | tail -1
echo "[$(el) s] executor_gpu_tests"
for bin in shared_gpu_tests:${SHARED_S:-70} batch_gpu_tests:40; do
  timeout ${bin##*:} build-device/tests/${bin%%:*} > "$OUT/${bin%%:*}.log" 2>&1; echo "${bin%%:*} exit $?"
  grep -E "^\[ +(OK|FAILED) \]|GPU SUMMARY|Failure|did not finish" "$OUT/${bin%%:*}.log" | cut -c1-300 | head -12
done
echo "[$(el) s] 2-GPU binaries"
unset CUDA_VISIBLE_DEVICES
fi
[ "$(nvidia-smi -L | wc -l)" -ge 4 ] || { echo "fewer than 4 GPUs: no 4-GPU suite"; exit 0; }
S="--placements R,S0,S1,P --strategies collective,p2p,hybrid --transports nccl,nvlink --iters 2 --warmup 1"
suite() {  # suite NAME PROCESSES(0: in process) BENCH-FLAGS...
  local name=$1 np=$2; shift 2
  local t=$(( $(left) / ${PARTS_LEFT:-1} ))
  if [ "$np" = 0 ]; then
    timeout $t $R bench --backend nccl "$@" $S --csv "$OUT/$name.csv" > "$OUT/$name.log" 2>&1; echo "$name exit $?"
  else
    local rv="/tmp/rv_${name}_$$" token="x4$RANDOM$$"
    for ((r = 0; r < np; r++)); do
      (RESHARD_RENDEZVOUS_TOKEN=$token RANK=$r LOCAL_RANK=$r WORLD_SIZE=$np timeout $t $R bench "$@" $S \
        --rendezvous file:$rv --csv "$OUT/$name.csv" > "$OUT/${name}_$r.log" 2>&1; echo "$name rank $r exit $?") &
    done
    wait; rm -f "$rv"; cp "$OUT/${name}_0.log" "$OUT/$name.log"
  fi
  grep -E "wrong|runs" "$OUT/$name.log" | tail -2
  python3 - "$OUT/$name.csv" <<'PY'
import csv, sys
rows = list(csv.DictReader(open(sys.argv[1])))
wrong = sum(int(r["wrong"] or 0) for r in rows); checked = sum(int(r["checked"] or 0) for r in rows)
by = {}
for r in rows: by[(r["mesh"], r["transport"], r.get("fused", ""))] = by.get((r["mesh"], r["transport"], r.get("fused", "")), 0) + 1
print(f"  {len(rows)} runs, {checked} elements checked, {wrong} wrong; runs by mesh/transport/fused: {by}")
PY
  echo "[$(el) s] $name"
}
PARTS_LEFT=4 suite suite4_inproc_mesh4 0 --meshes 4 --shapes 0x4,1x1,7x5,300x517 --dtypes f32,bf16
PARTS_LEFT=3 suite suite4_inproc_2x2 0 --meshes 2x2 --shapes 0x4,1x1,7x5,300x517 --dtypes f32
PARTS_LEFT=2 suite suite4_procs_mesh4 4 --meshes 4 --shapes 0x4,1x1,7x5,300x517 --dtypes f32,bf16
PARTS_LEFT=1 suite suite4_procs_2x2 4 --meshes 2x2 --shapes 0x4,7x5,300x517 --dtypes f32
echo "[$(el) s] done"

#!/usr/bin/env bash
# On the 2-GPU machine: a 1 GiB f32 S0->R on mesh (2) (p2p on nvlink) from each entry point, one machine: the CLI as
# two processes (reshard.torch's deployment: copy-engine pulls from IPC-mapped memory), with and without
# --buffers-change, traced once (--trace: each step's pack, communication and unpack); the CLI as one process (ranks
# of one process: kernel pulls); then python/bench/call_stages.py (Python, one call alone and back to back).
# Output: $OUT/s0r_gap.txt (rank 0's full output per run), $OUT/call_stages.log.
set -uo pipefail
cd "$(dirname "$0")/../.."
source scripts/device/lib.sh
device_begin || exit 1
echo "[$(el) s] built"
F=$OUT/s0r_gap.txt
flags="--from S0 --to R --shape 16384x16384 --dtype f32 --strategy p2p --transport nvlink --iters 30"
for extra in "" "--buffers-change" "--trace"; do
  rv="$OUT/rv_$RANDOM" token="gap$RANDOM$$"
  for rk in 0 1; do
    RESHARD_RENDEZVOUS_TOKEN=$token RANK=$rk LOCAL_RANK=$rk WORLD_SIZE=2 timeout 60 $R run --mesh 2 $flags $extra \
      --rendezvous file:$rv > "$OUT/mp_$rk.txt" 2>&1 &
  done
  wait; rm -f "$rv"
  { echo "== two processes $extra"; cat "$OUT/mp_0.txt"; } >> "$F"
done
{ echo "== one process"; timeout 60 $R run --backend nccl --mesh 2 $flags 2>&1; } >> "$F"
grep -E "^==|^  2 |verified|error" "$F"
export PYTHONPATH="$PWD/build-device/python" OMP_NUM_THREADS=4
timeout 200 torchrun --nproc-per-node 2 python/bench/call_stages.py --out /tmp > "$OUT/call_stages.log" 2>&1
echo "[$(el) s] call_stages: exit $?"; grep -E "16384" "$OUT/call_stages.log" | cut -c1-300

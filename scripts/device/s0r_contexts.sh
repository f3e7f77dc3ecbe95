#!/usr/bin/env bash
# On the 2-GPU machine: which processes hold a context on which GPU during a two-process 1 GiB f32 S0->R (p2p on
# nvlink; nvidia-smi's compute apps, 8 s in), and the same run with each process seeing only its own GPU
# (CUDA_VISIBLE_DEVICES=rank, LOCAL_RANK=0), twice each, alternating. Every run verified. Output: $OUT/s0r_contexts.txt.
set -uo pipefail
cd "$(dirname "$0")/../.."
source scripts/device/lib.sh
device_begin || exit 1
echo "[$(el) s] built"
F=$OUT/s0r_contexts.txt
flags="--mesh 2 --from S0 --to R --shape 16384x16384 --dtype f32 --strategy p2p --transport nvlink --fuse never"
run_pair() {  # run_pair ISOLATE ITERS
  local rv="$OUT/rv_$RANDOM" token="ctx$RANDOM$$"
  for rk in 0 1; do
    if [ "$1" = 1 ]; then vis=$rk; lr=0; else vis=0,1; lr=$rk; fi
    CUDA_VISIBLE_DEVICES=$vis RESHARD_RENDEZVOUS_TOKEN=$token RANK=$rk LOCAL_RANK=$lr WORLD_SIZE=2 timeout 90 $R run \
      $flags --iters $2 --rendezvous file:$rv > "$OUT/mp_$rk.txt" 2>&1 &
  done
  if [ "$2" -gt 100 ]; then
    sleep 8; { echo "-- contexts (isolate=$1)"; nvidia-smi --query-compute-apps=pid,gpu_bus_id,used_memory --format=csv; } >> "$F"
  fi
  wait; rm -f "$rv"
  grep -hE "^  2 |error" "$OUT/mp_0.txt" "$OUT/mp_1.txt" | sed "s|\$|   [isolate=$1 iters=$2]|" >> "$F"
}
run_pair 0 6000
for i in 1 2; do run_pair 0 30; run_pair 1 30; done
cat "$F"

#!/usr/bin/env bash
# On the 2-GPU machine: a 1 GiB f32 S0->R on mesh (2) (p2p on nvlink, not fused) as two processes, with the copies
# on the copy engines (bench/profiles/h100x2.json) and on kernels (the same profile with copy_engine_min_row_bytes
# 2^40: every region by the copy kernel), twice each, alternating; S0->S1 of the same tensor once each. Every run
# verified. Output: $OUT/s0r_engines.txt.
set -uo pipefail
cd "$(dirname "$0")/../.."
source scripts/device/lib.sh
device_begin || exit 1
echo "[$(el) s] built"
python3 -c "import json; d = json.load(open('bench/profiles/h100x2.json')); d['nvlink']['copy_engine_min_row_bytes'] = 1 << 40; d['name'] += '-kernels'; json.dump(d, open('/tmp/kernels.json', 'w'))"
F=$OUT/s0r_engines.txt
for pair in "S0 R" "S0 R" "S0 S1"; do
  set -- $pair
  for profile in bench/profiles/h100x2.json /tmp/kernels.json; do
    two_processes "$F" --from $1 --to $2 --shape 16384x16384 --dtype f32 --strategy p2p --transport nvlink \
      --fuse never --iters 30 --profile $profile
  done
done
cat "$F"

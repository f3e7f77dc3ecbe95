#!/usr/bin/env bash
# Predicted times (cost model only, no GPUs) for larger meshes than the machine has: the seed experiment's pairs on
# 4x4 over 2 nodes of 8 GPUs, 8x8 and 16x8, every strategy, f32 tensors 16 MiB .. 4 GiB. Writes CSV to stdout.
set -euo pipefail
R=${RESHARD:-build/tools/reshard}
PROFILE=${1:-bench/profiles/h200x2.json}
echo "mesh,from,to,shape,bytes,strategy,predicted_us,bytes_moved,chosen"
for mesh in 4x4 8x8 16x8; do
  for pair in "S0,S1:S1,S0" "S0,S0:S1,S1"; do
    from=${pair%%:*}; to=${pair##*:}
    for n in 2048 4096 8192 16384 32768; do
      $R plan --mesh $mesh --from $from --to $to --shape ${n}x${n} --ranks-per-node 8 --profile "$PROFILE" --json |
        /usr/bin/python3 -c '
import json, sys
p = json.load(sys.stdin)
for c in p["candidates"]:
    if c["available"]:
        print(",".join(map(str, [sys.argv[1], "\"%s\"" % sys.argv[2], "\"%s\"" % sys.argv[3], sys.argv[4], sys.argv[5], c["strategy"],
              c["estimated_us"], c["bytes_moved"], int(c["strategy"] == p["strategy"])])))' $mesh $from $to ${n}x${n} $((n*n*4))
    done
  done
done

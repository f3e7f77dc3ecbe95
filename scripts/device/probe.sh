#!/usr/bin/env bash
# On the GPU machine: a first look at speed: reshard strategies vs PyTorch on a few 2-GPU cases.
set -uo pipefail
cd "$(dirname "$0")/../.."
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1
OUT=${OUT:-/tmp}
R=build-device/tools/reshard
for c in "2 S0 S1 16384x16384 f32" "2 S0 R 16384x16384 f32" "2 S1 S0 16384x16384 f32" "2 S0 S1 1024x1024 f32" "2 S0 R 1024x1024 f32"; do
  set -- $c
  for s in collective p2p auto; do
    $R run --mesh $1 --from $2 --to $3 --shape $4 --dtype $5 --strategy $s --backend nccl --iters 20 | sed -n 4p
  done
  $R run --mesh $1 --from $2 --to $3 --shape $4 --dtype $5 --backend nccl --iters 20 --graph | sed -n 4p | sed 's/$/  (graph)/'
done 2>&1 | tee "$OUT/probe.txt"
cat > /tmp/cases.json <<'J'
[{"mesh":[2],"from":"S0","to":"S1","shape":[16384,16384],"dtype":"f32"},
 {"mesh":[2],"from":"S0","to":"R","shape":[16384,16384],"dtype":"f32"},
 {"mesh":[2],"from":"S1","to":"S0","shape":[16384,16384],"dtype":"f32"},
 {"mesh":[2],"from":"S0","to":"S1","shape":[1024,1024],"dtype":"f32"},
 {"mesh":[2],"from":"S0","to":"R","shape":[1024,1024],"dtype":"f32"}]
J
timeout 300 torchrun --nproc-per-node 2 bench/pytorch_baseline.py --cases /tmp/cases.json --out "$OUT/pytorch_probe.json" 2>&1 | grep -E "^pytorch|Error|error" | tee -a "$OUT/probe.txt"

#!/usr/bin/env bash
# On the 4-GPU machine (nvidia-h200-x4), in one call: build; the benchmark sweep on meshes (4) and (2,2) with every
# pair of R, S0, S1 (among them [S0,S1]->[S1,S0], [S0,S0]->[S1,S1], [S0,R]->[R,S1], [R,S0]->[S1,R]), every run
# verified element by element, priced with the 2x H200 calibrated profile; PyTorch's redistribute on the same cases;
# Partial redistributions on (2,2). Everything lands in $OUT.
set -uo pipefail
cd "$(dirname "$0")/../.."
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
OUT=${OUT:-/tmp}
R=build-device/tools/reshard
P=bench/profiles/h200x2.json
t0=$(date +%s)
stamp() { echo "[$(( $(date +%s) - t0 )) s] $*"; }
bash scripts/device/build.sh || exit 1
stamp built
{ date -u; nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv; nvidia-smi topo -m
  python3 -c 'import torch; print("torch", torch.__version__, "nccl", torch.cuda.nccl.version())'
} > "$OUT/machine.txt" 2>&1
timeout 220 $R bench --meshes 4,2x2 --sizes 4MiB,64MiB,256MiB,1GiB --dtypes bf16 --profile $P \
  --csv "$OUT/sweep.csv" --cases "$OUT/cases.json" > "$OUT/sweep.log" 2>&1
tail -3 "$OUT/sweep.log"
stamp swept
timeout 170 torchrun --nproc-per-node 4 bench/pytorch_baseline.py --cases "$OUT/cases.json" --out "$OUT/pytorch.json" \
  > "$OUT/pytorch.log" 2>&1
tail -2 "$OUT/pytorch.log"
stamp pytorch
source scripts/device/lib.sh
for spec in "P,P S0,S1" "P,S0 S1,R" "S0,S1 P,R" "P(avg),P(avg) S1,S0"; do
  set -- $spec
  for s in collective p2p hybrid; do
    timeout 20 bash -c "$(declare -f bench); R=$R P=$P OUT=$OUT; bench '2x2 $1>$2 4096x4096 f32 $s' --mesh 2x2 --from '$1' --to '$2' --shape 4096x4096 --dtype f32 --strategy $s" || true
  done
done
stamp partial
gzip -f "$OUT/sweep.log" "$OUT/pytorch.log"

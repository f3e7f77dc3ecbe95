#!/usr/bin/env bash
# On the 2-GPU machine, one call: build; nccl vs nvlink vs auto on the acceptance cases, one process per rank as
# deployed (in process, nvlink pulls run as kernels: docs/transports.md); the link measured for the bound; the contention
# run; PyTorch's redistribute on the same cases. The GPU suite and compute-sanitizer are gpu_suite.sh's. Files under $OUT.
set -uo pipefail
cd "$(dirname "$0")/../.."
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
OUT=${OUT:-/tmp}; R=build-device/tools/reshard
t0=$(date +%s); el() { echo $(( $(date +%s) - t0 )); }
bash scripts/device/build.sh -DCMAKE_CXX_FLAGS=-g > "$OUT/build.txt" 2>&1 || { tail -30 "$OUT/build.txt"; exit 1; }
{ date -u; nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv; nvidia-smi topo -m
  python3 -c 'import torch; print("torch", torch.__version__, "nccl", torch.cuda.nccl.version())'; } > "$OUT/machine.txt" 2>&1
echo "[$(el) s] built"
# One process per rank (lib.sh's two_processes); rank 0's row.
source scripts/device/lib.sh
b() { two_processes "$OUT/bench.txt" "$@"; }
L="--shape 16384x16384 --iters 20"
for pair in "S0 S1" "S1 S0" "S0 R" "R S0" "P S0"; do set -- $pair
  for tr in nccl nvlink; do b --from $1 --to $2 $L --strategy p2p --transport $tr; done
  b --from $1 --to $2 $L
done
b --from S0 --to S1 --shape 16384x32768 --dtype bf16 --iters 20 --strategy p2p --transport nccl
b --from S0 --to S1 --shape 16384x32768 --dtype bf16 --iters 20
for s in 1024x1024 256x256 64x64; do
  b --from S0 --to S1 --shape $s --iters 300 --strategy p2p --transport nccl
  b --from S0 --to S1 --shape $s --iters 300 --strategy collective
  b --from S0 --to S1 --shape $s --iters 300 --strategy p2p --transport nvlink --fuse never
  b --from S0 --to S1 --shape $s --iters 300 --strategy p2p --transport nvlink --fuse always
  b --from S0 --to S1 --shape $s --iters 300 --strategy p2p --transport nvlink --fuse always --graph
  b --from S0 --to S1 --shape $s --iters 300
  b --from S0 --to S1 --shape $s --iters 300 --graph
done
cat "$OUT/bench.txt"
echo "[$(el) s] bench"
# In process: pulls (kernels there) against pushes on the copy engines (--one-sided-copies push).
for pair in "S0 S1" "S0 R"; do set -- $pair
  for how in pull push; do
    timeout 60 $R run --backend nccl --mesh 2 --from $1 --to $2 $L --strategy p2p --transport nvlink \
      --one-sided-copies $how 2>&1 | grep -E "^  2 |error" | sed "s|\$|   [in process, $how: $*]|" | tee -a "$OUT/bench.txt"
  done
done
# In process, the link measured first (cudaMemcpyPeer: the copy engines' peer bandwidth) for the bound.
timeout 60 $R run --backend nccl --mesh 2 --from R --to S0 --shape 16384x16384 --iters 20 --measure-link 2>&1 \
  | grep -iE "link|^  2 " | tee "$OUT/link.txt"
echo "[$(el) s] link"
{ echo "== contention (in process): 1 GiB S0->S1 beside bf16 8192^3 GEMMs"
  timeout 100 $R contention --mesh 2 --from S0 --to S1 --shape 16384x16384 --strategy p2p --transports nvlink,nccl \
    --gemm 8192x8192x8192:bf16 --repeats 5 2>&1; echo "contention exit $?"; } | tee -a "$OUT/bench.txt"
echo "[$(el) s] contention"
python3 - "$OUT/cases.json" <<'PY'
import json, sys
c = [dict(mesh=[2], **{"from": f, "to": t}, shape=s, dtype=d) for f, t, s, d in [
    ("S0", "S1", [16384, 16384], "f32"), ("S1", "S0", [16384, 16384], "f32"), ("S0", "R", [16384, 16384], "f32"),
    ("R", "S0", [16384, 16384], "f32"), ("P", "S0", [16384, 16384], "f32"), ("S0", "S1", [16384, 32768], "bf16"),
    ("S0", "S1", [1024, 1024], "f32"), ("S0", "S1", [256, 256], "f32"), ("S0", "S1", [64, 64], "f32")]]
json.dump(c, open(sys.argv[1], "w"))
PY
timeout 150 torchrun --nproc-per-node 2 bench/pytorch_baseline.py --cases "$OUT/cases.json" --out "$OUT/pytorch.json" \
  > /tmp/pytorch.log 2>&1; echo "pytorch exit $?"; grep -iE "error|Traceback" /tmp/pytorch.log | head -3; rm -f "$OUT/cases.json"
grep "^pytorch " /tmp/pytorch.log
echo "[$(el) s] done"

#!/usr/bin/env bash
# On the GPU machine: where the time goes. Link bandwidths; per-step traces of S0->S1 at 1 GiB with and without
# pipelining; small-tensor latency with blocking / non-blocking NCCL, with and without a CUDA graph.
set -uo pipefail
cd "$(dirname "$0")/../.."
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1
OUT=${OUT:-/tmp}
R=build-device/tools/reshard
{
$R run --mesh 2 --from S0 --to S1 --shape 16384x16384 --backend nccl --strategy p2p --measure-link --iters 10 --trace --pipeline-chunk 0
for chunk in 4MiB 16MiB 64MiB; do
  $R run --mesh 2 --from S0 --to S1 --shape 16384x16384 --backend nccl --strategy p2p --iters 10 --trace --pipeline-chunk $chunk | sed -n '4,5p'
done
$R run --mesh 2 --from S0 --to R --shape 16384x16384 --backend nccl --iters 10 --trace | sed -n '4,5p'
$R run --mesh 2 --from S0 --to R --shape 16384x16384 --backend nccl --strategy collective --iters 10 --trace | sed -n '4,5p'
for s in 1024x1024 256x256; do
  for extra in "" "--nccl-blocking" "--graph" "--graph --nccl-blocking"; do
    $R run --mesh 2 --from S0 --to S1 --shape $s --backend nccl --strategy p2p --iters 50 --trace $extra | sed -n '4,5p' | sed "s/\$/  [$extra]/"
  done
  $R run --mesh 2 --from S0 --to R --shape $s --backend nccl --iters 50 --trace --nccl-blocking | sed -n '4,5p'
  $R run --mesh 2 --from S0 --to R --shape $s --backend nccl --iters 50 --strategy collective --nccl-blocking --graph | sed -n '4,5p'
done
} 2>&1 | tee "$OUT/probe2.txt"

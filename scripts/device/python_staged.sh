#!/usr/bin/env bash
# On the 2-GPU machine, one call: the Python checks and benchmark (python/gpu_tests/run_all.sh, which builds), then the
# same small redistributions from the CLI planned for fixed buffers and for changing ones (--buffers-change: a staged
# first step), eager and from a CUDA graph. Everything lands in $OUT/python_staged.tgz.
set -uo pipefail
cd "$(dirname "$0")/../.."
source scripts/device/lib.sh
archive_begin python_staged || exit 1
SKIP_BUILD=1 OUT=$OUT PARTS="${PARTS:-redistribute tp_mlp bench example}" BUDGET=330 RTIME=${RTIME:-80} \
  bash python/gpu_tests/run_all.sh 2>&1 | tail -30
R=build-device/tools/reshard
export NCCL_NVLS_ENABLE=0
for pair in "S0 S1" "S0 R" "P R"; do
  set -- $pair
  for mode in "" "--buffers-change"; do
    for graph in "" "--graph"; do
      timeout 60 $R run --backend nccl --mesh 2 --from $1 --to $2 --shape 1024x1024 --dtype f32 --iters 50 $mode $graph \
        2>&1 | grep -E "^  |verified|error|staged" | sed "s|\$|   [$1->$2 ${mode:-fixed} ${graph:-eager}]|"
    done
  done
done | tee "$OUT/cli_small.txt"
timeout 60 $R plan --mesh 2 --from S0 --to S1 --shape 1024x1024 --buffers-change --json > "$OUT/plan_staged.json" 2>&1
archive_end

#!/usr/bin/env bash
# On the 2-GPU machine, in one call: build, the NVLink-transport GPU tests, then nccl vs nvlink side by side on the
# acceptance cases (every element verified), small tensors eager and from a CUDA graph. Logs under $OUT.
set -uo pipefail
cd "$(dirname "$0")/../.."
source scripts/device/lib.sh
t0=$(date +%s); stamp() { echo "[$(( $(date +%s) - t0 )) s] $*"; }
device_setup || exit 1
stamp built
export RESHARD_CLI="$PWD/$R"
timeout ${GPU_TEST_S:-200} $T --gtest_filter="${GPU_FILTER:-*}" > "$OUT/gpu_tests.log" 2>&1; echo "gpu tests exit $?"
grep -E "^\[  (PASSED|FAILED) |^\[  FAILED|GPU SUMMARY|Failure|error:" "$OUT/gpu_tests.log" | head -40
stamp gpu tests
run() { timeout 60 $R run --backend nccl "$@" 2>&1 | grep -vE "^#" | tail -3; }
{
for tr in nccl nvlink; do
  echo "== $tr"
  run --mesh 2 --from S0 --to S1 --shape 16384x16384 --dtype f32 --strategy p2p --transport $tr --iters 20 --measure-link
  run --mesh 2 --from S1 --to S0 --shape 16384x16384 --dtype f32 --strategy p2p --transport $tr --iters 20
  run --mesh 2 --from S0 --to R --shape 16384x16384 --dtype f32 --strategy p2p --transport $tr --iters 20
  run --mesh 2 --from S0 --to S1 --shape 16384x32768 --dtype bf16 --strategy p2p --transport $tr --iters 20
  run --mesh 2 --from S0 --to S1 --shape 1024x1024 --dtype f32 --strategy p2p --transport $tr --iters 100
  run --mesh 2 --from S0 --to S1 --shape 1024x1024 --dtype f32 --strategy p2p --transport $tr --iters 100 --graph
  run --mesh 2 --from S0 --to R --shape 512x512 --dtype f32 --strategy p2p --transport $tr --iters 100
done
echo "== local and auto"
run --mesh 2 --from R --to S0 --shape 16384x16384 --dtype f32 --iters 20
run --mesh 2 --from R --to S1 --shape 16384x16384 --dtype f32 --iters 20
run --mesh 2 --from S0 --to S1 --shape 16384x16384 --dtype f32 --iters 20
run --mesh 2 --from P --to S0 --shape 16384x16384 --dtype f32 --strategy p2p --transport nvlink --iters 20
run --mesh 2 --from P --to S0 --shape 16384x16384 --dtype f32 --iters 20
} 2>&1 | tee "$OUT/bench.txt"
stamp bench
if [ -f tests/data/make_strided_fixture.py ]; then
  timeout 120 python3 tests/data/make_strided_fixture.py --out "$OUT/pytorch_strided_layouts.json" > "$OUT/fixture.log" 2>&1
  echo "fixture exit $?"; tail -3 "$OUT/fixture.log"
fi
stamp done

#!/usr/bin/env bash
# On the 2-GPU machine, one call after the in-process copy-engine fix: the queue probe (one hardware queue per device,
# and the default), the acceptance case in-process (kernel pulls) and one process per rank (copy-engine pulls), then
# the in-process GPU suite. Files under $OUT.
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:-/tmp}; R=build-device/tools/reshard; T=build-device/tests/executor_gpu_tests
export NCCL_NVLS_ENABLE=0
t0=$(date +%s); el() { echo $(( $(date +%s) - t0 )); }
N=${N:-4} WAIT=8 TIMEOUT_MS=3000 SKIP_TEST=1 PROBE_UNTIL_S=150 CASES="--from S0 --to R --shape 256x256;--from S0 --to S1 --shape 1024x1024" \
  VARIANTS="connections1 mp+connections1 base" bash scripts/device/hang_probe.sh
echo "[$(el) s] probes"
mp() {  # one process per rank; rank 0's table row
  local rv="$OUT/rv_bench_$RANDOM" token="bench$RANDOM$$"  # one token for both ranks
  for rk in 0 1; do
    RESHARD_RENDEZVOUS_TOKEN=$token RANK=$rk LOCAL_RANK=$rk WORLD_SIZE=2 timeout 60 $R run --mesh 2 "$@" \
      --rendezvous file:$rv > "$OUT/mp_$rk.txt" 2>&1 &
  done
  wait; grep -hE "^  2 |error" "$OUT/mp_0.txt" "$OUT/mp_1.txt" | sed "s|\$|   [mp $*]|"
}
sp() { timeout 60 $R run --backend nccl --mesh 2 "$@" 2>&1 | grep -E "^  2 |error" | sed "s|\$|   [in-process $*]|"; }
L="--shape 16384x16384 --iters 20"
{ for pair in "S0 S1" "S0 R"; do set -- $pair
    sp --from $1 --to $2 $L --strategy p2p --transport nvlink
    mp --from $1 --to $2 $L --strategy p2p --transport nvlink
    mp --from $1 --to $2 $L
  done; } | tee "$OUT/bench.txt"
echo "[$(el) s] bench"
timeout ${GPU_TEST_S:-150} $T > "$OUT/gpu_tests.log" 2>&1; echo "gpu tests exit $?"
grep -E "^\[  (PASSED|FAILED) |^\[  FAILED|GPU SUMMARY|Failure" "$OUT/gpu_tests.log" | head -20
grep -E "^\[ RUN" "$OUT/gpu_tests.log" | tail -1
echo "[$(el) s] done"

#!/usr/bin/env bash
# On the 2-GPU machine, one call: what stalls. (1) A rank process that dies mid-run on nvlink: the survivor's phases
# and, if it is still alive after its timeout, every thread's stack. (2) Ranks sharing GPUs (shared_gpu_tests),
# pulled then pushed, each run named (RESHARD_TEST_VERBOSE). Then the in-process overlap (pushes) and the >= 256 MiB
# sweep on mesh (2) against the bound measured in the same run. Files under $OUT.
set -uo pipefail
cd "$(dirname "$0")/../.."
source scripts/device/lib.sh
device_begin || exit 1
echo "[$(el) s] built; gdb: $(command -v gdb || echo none)"
rv="file:/tmp/fault_rv_$$"; token="fault$RANDOM$$"
for r in 0 1; do
  RESHARD_TRACE_PHASES=1 RESHARD_RENDEZVOUS_TOKEN=$token RANK=$r WORLD_SIZE=2 LOCAL_RANK=$r timeout 40 $R run --mesh 2 \
    --from S0 --to S1 --shape 4096x4096 --iters 5 --timeout-ms 5000 --strategy p2p --transport nvlink \
    --inject-fault 1:mid-run --rendezvous $rv > "$OUT/fault_$r.txt" 2>&1 &
done
sleep 15
pid=$(pgrep -f "inject-fault 1:mid-run" | head -1)
if [ -n "$pid" ] && command -v gdb > /dev/null; then
  for p in $(pgrep -f "reshard run --mesh 2"); do
    timeout 20 gdb -batch -p $p -ex "thread apply all bt 25" > "$OUT/fault_bt_$p.txt" 2>&1
  done
fi
wait; echo "fault survivor:"; tail -12 "$OUT/fault_0.txt"; echo "fault dead rank:"; tail -3 "$OUT/fault_1.txt"
for f in "$OUT"/fault_bt_*.txt; do [ -f "$f" ] && grep -E "^#[0-9]+ " "$f" | grep -E "reshard|cuda|nccl|Executor|wait|release" | head -30; done
echo "[$(el) s] fault"
for how in pull push; do
  RESHARD_TEST_ONE_PROCESS_COPIES=$how RESHARD_TEST_VERBOSE=1 timeout 80 build-device/tests/shared_gpu_tests \
    --gtest_filter='SharedGpu.EveryPairOnMeshes*:SharedGpu.EveryPairOnMesh2x2' > "$OUT/shared_$how.log" 2>&1
  echo "shared $how exit $?"; grep -E "^\[ +(OK|FAILED) \]|did not finish" "$OUT/shared_$how.log" | cut -c1-300 | head -8
  grep -B2 "did not finish" "$OUT/shared_$how.log" | grep "  run " | head -4
done
echo "[$(el) s] shared"
timeout 100 $R overlap --mesh 2 --from S0 --to S1 --shape 16384x16384 --strategy p2p --transports nvlink,nccl \
  --gemm 8192x8192x8192:bf16 --repeats 5 > "$OUT/overlap.txt" 2>&1; echo "overlap exit $?"; cat "$OUT/overlap.txt"
echo "[$(el) s] overlap"
timeout $(( 560 - $(el) )) $R bench --backend nccl --meshes 2 --sizes 256MiB,1GiB --dtypes f32 --placements R,S0,S1 \
  --iters 10 --warmup 2 --csv "$OUT/sweep.csv" > "$OUT/sweep.txt" 2>&1; echo "sweep exit $?"
grep -vE "^\[" "$OUT/sweep.txt" | tail -45
echo "[$(el) s] done"

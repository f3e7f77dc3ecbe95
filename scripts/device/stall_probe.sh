#!/usr/bin/env bash
# One GPU: does the (2,2) shared-GPU test stall or is it slow? Runs it with each run printed; if it is still running
# after WAIT seconds, dumps every thread's stack (gdb, else /proc) and kills it. Files under $OUT.
set -uo pipefail
cd "$(dirname "$0")/../.."
export NCCL_NVLS_ENABLE=0 RESHARD_TEST_VERBOSE=1
OUT=${OUT:-/tmp}
t0=$(date +%s); el() { echo $(( $(date +%s) - t0 )); }
bash scripts/device/build.sh > "$OUT/probe_build.log" 2>&1 || { tail -30 "$OUT/probe_build.log"; exit 1; }
echo "[$(el) s] built"
build-device/tests/shared_gpu_tests --gtest_also_run_disabled_tests --gtest_filter='SharedGpu.DISABLED_*' > "$OUT/stall.log" 2>&1 &
pid=$!
for i in $(seq 1 "${WAIT:-150}"); do kill -0 $pid 2>/dev/null || break; sleep 1; done
if kill -0 $pid 2>/dev/null; then
  echo "[$(el) s] still running: stacks"
  if command -v gdb >/dev/null; then gdb -p $pid -batch -ex "thread apply all bt 12" > "$OUT/stacks.txt" 2>&1
  else for t in /proc/$pid/task/*; do echo "== $t $(cat $t/comm) $(cat $t/wchan)"; cat $t/stack 2>/dev/null; done > "$OUT/stacks.txt"; fi
  nvidia-smi >> "$OUT/stacks.txt" 2>&1
  kill -9 $pid
  grep -E "^#[0-9]+ .* in (reshard|cuda|std::thread|testing)" "$OUT/stacks.txt" | sed 's/0x[0-9a-f]* in //' | sort | uniq -c | sort -rn | head -40
else wait $pid; echo "exit $?"; fi
tail -25 "$OUT/stall.log"
echo "[$(el) s] done"

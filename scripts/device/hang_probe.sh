#!/usr/bin/env bash
# On the 2-GPU machine: how often do non-fused nvlink runs hang, and where? Runs a probe case N times (each in the
# background); one still running after WAIT seconds gets every thread's stack dumped (gdb) and is killed. Then the GPU
# test that stopped before, watched the same way (no new output for TEST_WAIT seconds = stalled). Files under $OUT.
set -uo pipefail
cd "$(dirname "$0")/../.."
export NCCL_NVLS_ENABLE=0 RESHARD_TEST_VERBOSE=1
OUT=${OUT:-/tmp}; R=build-device/tools/reshard; T=build-device/tests/executor_gpu_tests
t0=$(date +%s); el() { echo $(( $(date +%s) - t0 )); }
bash scripts/device/build.sh -DCMAKE_CXX_FLAGS=-g > "$OUT/hang_build.log" 2>&1 || { tail -30 "$OUT/hang_build.log"; exit 1; }
echo "[$(el) s] built; gdb: $(command -v gdb || echo none)"
stacks() {  # pid file
  if command -v gdb > /dev/null; then timeout 60 gdb -p "$1" -batch -ex "thread apply all bt 20" > "$2" 2>&1
  else for t in /proc/$1/task/*; do echo "== $t $(cat $t/comm) $(cat $t/wchan)"; cat $t/stack 2>/dev/null; done > "$2"; fi
  nvidia-smi --query-gpu=index,utilization.gpu,memory.used --format=csv >> "$2" 2>&1
  grep -E "^#[0-9]+ " "$2" | grep -vE "in (__|clone|start_thread|syscall|pthread_cond)" | sed -E 's/0x[0-9a-f]+ in //; s/ \(.*\) at / at /' \
    | awk '{$1=""; print}' | sort | uniq -c | sort -rn | head -30
}
export RESHARD_TRACE_PHASES=1
# A stalled run times out after TIMEOUT_MS (the error names the one-sided waits still pending and their flags) or,
# failing that, is killed after WAIT seconds.
# kernelpull: every copy as a kernel (a profile whose copy-engine threshold no row reaches). mp: one process per rank.
python3 - > "$OUT/kernelpull.json" <<'PY'
import json; d = json.load(open("bench/profiles/h200x2.json"))
d["nvlink"] = {"copy_engine": {"alpha_us": 4.0, "bandwidth_GBps": 380.0}, "kernel": {"alpha_us": 4.0, "bandwidth_GBps": 326.0},
               "sync_us": 8.0, "step_overhead_us": 12.0, "copy_engine_min_row_bytes": 1 << 40}
print(json.dumps(d))
PY
[ -n "${TRACE_OPS:-}" ] && export RESHARD_TRACE_OPS=1
for variant in ${VARIANTS:-base}; do
  hangs=0; runs=0; extra=""; mp=0; envs=""
  for part in ${variant//+/ }; do  # parts combine: kerneldirect+connections1
    case $part in
      base) ;;
      connections32) envs="$envs CUDA_DEVICE_MAX_CONNECTIONS=32" ;;
      connections1) envs="$envs CUDA_DEVICE_MAX_CONNECTIONS=1" ;;
      eager) envs="$envs CUDA_MODULE_LOADING=EAGER" ;;
      kernelpull) extra="--profile $OUT/kernelpull.json" ;;
      push) extra="--one-sided-copies push" ;;
      mp) mp=1 ;;
      *) echo "unknown variant $part"; exit 2 ;;
    esac
  done
  IFS=';' read -ra cases <<< "${CASES:---from S0 --to R --shape 256x256;--from S0 --to S1 --shape 1024x1024}"
  for args in "${cases[@]}"; do
    for i in $(seq 1 ${N:-15}); do
      [ $(el) -gt ${PROBE_UNTIL_S:-400} ] && break
      runs=$((runs + 1))
      cmd="$R run --backend nccl --mesh 2 --iters 20 --timeout-ms ${TIMEOUT_MS:-3000} --strategy p2p --transport nvlink --fuse never $extra $args"
      pids=""
      if [ $mp = 1 ]; then
        rv="$OUT/rv_${variant}_$i"; rm -f "$rv"*
        for rk in 0 1; do
          env $envs RESHARD_RENDEZVOUS_TOKEN=probe$i$$ RANK=$rk LOCAL_RANK=$rk WORLD_SIZE=2 $cmd --rendezvous file:$rv >> "$OUT/probe_run.txt" 2>&1 &
          pids="$pids $!"
        done
      else
        env $envs $cmd > "$OUT/probe_run.txt" 2>&1 &
        pids=$!
      fi
      for s in $(seq 1 $((${WAIT:-10} * 10))); do
        alive=0; for p in $pids; do kill -0 $p 2>/dev/null && alive=1; done
        [ $alive = 0 ] && break; sleep 0.1
      done
      killed=0; rc=0
      for p in $pids; do if kill -0 $p 2>/dev/null; then kill -9 $p; killed=1; fi; done
      for p in $pids; do wait $p 2>/dev/null || rc=$?; done
      if [ $killed = 1 ] || grep -q "did not finish\|no progress" "$OUT/probe_run.txt"; then
        hangs=$((hangs + 1))
        if [ $hangs -le ${SHOW:-4} ]; then
          echo "== $variant stall $hangs [$args] (killed $killed, exit $rc): last lines per rank"
          for rk in 0 1; do grep "^rank $rk:" "$OUT/probe_run.txt" | grep -v "pending\|did not" | tail -${LAST:-2}; done
          grep -o "one-sided waits pending.*" "$OUT/probe_run.txt" | head -2
          cp "$OUT/probe_run.txt" "$OUT/stall_${variant}_$hangs.txt"
        fi
      elif [ $rc -ne 0 ]; then
        echo "$variant run $i [$args] exit $rc"; grep -v "^rank [01]: \(op\|post\|no post\|run\|verify\|poison\)" "$OUT/probe_run.txt" | tail -4
        cp "$OUT/probe_run.txt" "$OUT/fail_${variant}_$i.txt"
      fi
      rm -f "$OUT/probe_run.txt"
    done
  done
  echo "[$(el) s] $variant: $hangs stalls in $runs runs"
done
[ -n "${SKIP_TEST:-}" ] && exit 0
$T --gtest_filter="${TEST_FILTER:-Gpu.EveryPairAndStrategyOnMeshes2And1x2And2x1}" > "$OUT/hang_test.log" 2>&1 &
pid=$!; start=$(el)
while kill -0 $pid 2>/dev/null; do
  sleep 1
  if [ $(( $(el) - start )) -ge ${TEST_WAIT:-100} ] || [ $(el) -gt ${TEST_UNTIL_S:-520} ]; then
    echo "[$(el) s] test still running after $(( $(el) - start )) s: stacks"; stacks $pid "$OUT/hang_test_stacks.txt"
    kill -9 $pid; break
  fi
done
wait $pid 2>/dev/null; echo "test exit $?"
grep -E "^\[  (PASSED|FAILED) |^\[  FAILED|Failure" "$OUT/hang_test.log" | head; tail -4 "$OUT/hang_test.log"
echo "[$(el) s] done"

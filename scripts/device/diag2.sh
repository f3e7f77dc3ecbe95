#!/usr/bin/env bash
# On the 2-GPU machine, one call: build; a rank process that dies mid-run on nvlink (the survivor's host stacks, by
# cuda-gdb or eu-stack, while it hangs); compute-sanitizer memcheck, racecheck, synccheck on the light in-process
# tests (sanitize.sh's filter); then the Python GPU checks (python/gpu_tests/run_all.sh) in what is left. $OUT.
set -uo pipefail
cd "$(dirname "$0")/../.."
source scripts/device/lib.sh
t0=$(date +%s); el() { echo $(( $(date +%s) - t0 )); }
device_setup > "$OUT/build.txt" 2>&1 || { tail -30 "$OUT/build.txt"; exit 1; }
GDB=$(command -v cuda-gdb || ls /usr/local/cuda*/bin/cuda-gdb 2>/dev/null | head -1); ES=$(command -v eu-stack)
echo "[$(el) s] built; cuda-gdb: ${GDB:-none}; eu-stack: ${ES:-none}"
rv="file:/tmp/fault_rv_$$"; token="fault$RANDOM$$"
for r in 0 1; do
  RESHARD_TRACE_PHASES=1 RESHARD_RENDEZVOUS_TOKEN=$token RANK=$r WORLD_SIZE=2 LOCAL_RANK=$r timeout 45 $R run --mesh 2 \
    --from S0 --to S1 --shape 4096x4096 --iters 5 --timeout-ms 5000 --strategy p2p --transport nvlink \
    --inject-fault 1:mid-run --rendezvous $rv > "$OUT/fault_$r.txt" 2>&1 &
done
sleep 16
for p in $(pgrep -f "inject-fault 1:mid-run" | xargs); do
  comm=$(cat /proc/$p/comm 2>/dev/null); [ "$comm" = reshard ] || continue
  for t in /proc/$p/task/*; do echo "$t $(cat $t/wchan 2>/dev/null) $(cut -d' ' -f1-3 $t/syscall 2>/dev/null)"; done > "$OUT/fault_tasks_$p.txt"
  if [ -n "$GDB" ]; then timeout 25 $GDB -batch -p $p -ex "thread apply all bt 30" > "$OUT/fault_bt_$p.txt" 2>&1
  elif [ -n "$ES" ]; then timeout 20 $ES -p $p > "$OUT/fault_bt_$p.txt" 2>&1; fi
  grep -E "^#[0-9]+ " "$OUT/fault_bt_$p.txt" 2>/dev/null | grep -vE "pthread|clone|start_thread|futex|poll|epoll" | head -40
done
wait; echo "fault survivor:"; tail -4 "$OUT/fault_0.txt"
echo "[$(el) s] fault"
SANITIZE_S=90 sanitize "$T" "Gpu.EveryPairAndStrategy*:Gpu.NvlinkStepsPulledAsKernelsEveryPair"
echo "[$(el) s] sanitizers"
left=$(( 575 - $(el) ))
OUT=$OUT/python SKIP_BUILD=1 BUDGET=$left RTIME=50 PARTS="redistribute tp_mlp example" bash python/gpu_tests/run_all.sh 2>&1 | tail -25
echo "[$(el) s] done"

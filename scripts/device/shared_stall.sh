#!/usr/bin/env bash
# One call on any GPU machine: do ranks sharing a GPU stall (tests/shared_gpu_test.cpp, every run named), and does the
# number of hardware queues decide it? Each variant runs the every-pair tests REPS times in fresh processes:
#   push/pull     in-process copies pushed (default) or pulled, CUDA_DEVICE_MAX_CONNECTIONS=32 (the test's default)
#   connN         the same with N hardware queues per device
#   eager         pushes with every CUDA module loaded when the context starts (CUDA_MODULE_LOADING=EAGER): a lazily
#                 loaded kernel can need a context-wide synchronisation, which waits for streams held by peers' waits
#   direct        pushes, with posts to ranks of this process written straight into their flags by a stream operation
#                 (RESHARD_FLAG_POSTS=write) instead of a copy-engine copy, which may wait on the peer GPU's queues
# VARIANTS picks some (default: all but direct, in this order).
# Prints per variant: runs that passed, runs that stalled and the first stall's run and message. Files under $OUT.
set -uo pipefail
cd "$(dirname "$0")/../.."
source scripts/device/lib.sh
device_begin || exit 1
echo "[$(el) s] built on $(nvidia-smi --query-gpu=name --format=csv,noheader | head -1) x $(nvidia-smi -L | wc -l)"
S=build-device/tests/shared_gpu_tests
F=${FILTER:-SharedGpu.EveryPairOnMeshes*:SharedGpu.EveryPairOnMesh2x2:SharedGpu.EveryPairBetweenMeshes}
variant() {  # NAME REPS ENV...
  local name=$1 reps=$2; shift 2
  local ok=0 bad=0
  for i in $(seq 1 $reps); do
    [ "$(left)" -lt 35 ] && break
    env "$@" RESHARD_TEST_VERBOSE=1 timeout 120 $S --gtest_filter="$F" > "$OUT/${name}_$i.log" 2>&1
    if [ $? -eq 0 ]; then ok=$((ok + 1)); else
      bad=$((bad + 1))
      [ $bad -eq 1 ] && { grep -B2 -m1 "did not finish\|Failure" "$OUT/${name}_$i.log" | grep "run " | tail -1
                          grep -m1 "did not finish\|exception" "$OUT/${name}_$i.log" | cut -c1-1500; }
    fi
  done
  echo "[$(el) s] $name: $ok passed, $bad failed"
}
for v in ${VARIANTS:-push pull eager conn8 conn2}; do
  case $v in
    push) variant push ${REPS:-3} CUDA_DEVICE_MAX_CONNECTIONS=32 ;;
    pull) variant pull ${REPS:-3} CUDA_DEVICE_MAX_CONNECTIONS=32 RESHARD_TEST_ONE_PROCESS_COPIES=pull ;;
    eager) variant eager ${REPS:-3} CUDA_DEVICE_MAX_CONNECTIONS=32 CUDA_MODULE_LOADING=EAGER ;;
    conn8) variant conn8 2 CUDA_DEVICE_MAX_CONNECTIONS=8 ;;
    conn2) variant conn2 2 CUDA_DEVICE_MAX_CONNECTIONS=2 ;;
    direct) variant direct ${REPS:-3} CUDA_DEVICE_MAX_CONNECTIONS=32 RESHARD_FLAG_POSTS=write ;;
  esac
done
grep -h "shared GPU:" "$OUT"/push_1.log

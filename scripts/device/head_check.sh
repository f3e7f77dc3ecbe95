#!/usr/bin/env bash
# On the 2-GPU machine, one call: the C++ GPU tests, then reshard.torch's checks and benchmarks from Python, all on the
# working tree as it is. Parts (PARTS, default all): gpu_tests (executor_gpu_tests, shared_gpu_tests), stages
# (python/bench/call_stages.py), stages_trace (the same, RESHARD_TRACE_OPS=1), sweep (`reshard bench` on mesh (2),
# 256 KiB-256 MiB f32, every pair of R/S0/S1, strategy and transport, with the built-in profile and with
# bench/profiles/h100x2.json), bench (bench_torch.py, extra flags in BENCH_ARGS), redistribute (check_redistribute.py,
# RTIME seconds).
# Files directly under $OUT: build.txt, *_tests.log, call_stages.json/.log, sweep_*.csv/.log, bench.json/.log,
# redistribute_*.
set -uo pipefail
cd "$(dirname "$0")/../.."
source scripts/device/lib.sh
device_begin || exit 1
echo "[$(el) s] built"
PARTS=${PARTS:-gpu_tests stages bench redistribute}
export PYTHONPATH="$PWD/build-device/python${PYTHONPATH:+:$PYTHONPATH}" OMP_NUM_THREADS=4
has() { [[ " $PARTS " == *" $1 "* ]]; }
if has gpu_tests; then
  for t in executor_gpu_tests shared_gpu_tests; do
    timeout 300 build-device/tests/$t > "$OUT/$t.log" 2>&1
    echo "[$(el) s] $t: exit $?"
    grep -E "^\[  (PASSED|FAILED) |Failure|verified runs|wrong" "$OUT/$t.log" | tail -6
  done
fi
if has stages; then
  timeout 200 torchrun --nproc-per-node 2 python/bench/call_stages.py --out "$OUT" > "$OUT/call_stages.log" 2>&1
  echo "[$(el) s] call_stages: exit $?"; grep -E "^\[rank0\]|->" "$OUT/call_stages.log" | tail -8
fi
if has stages_trace; then  # the same with RESHARD_TRACE_OPS=1: each expose's parts (describe, all-gather, map)
  RESHARD_TRACE_OPS=1 timeout 200 torchrun --nproc-per-node 2 python/bench/call_stages.py --out "$OUT/trace" \
    > "$OUT/call_stages_trace.log" 2>&1
  echo "[$(el) s] call_stages traced: exit $?"; grep -E "expose" "$OUT/call_stages_trace.log" | tail -6
fi
if has sweep; then
  sweep_mesh2 builtin
  sweep_mesh2 calibrated bench/profiles/h100x2.json
fi
if has bench; then
  timeout 240 torchrun --nproc-per-node 2 python/bench/bench_torch.py --out "$OUT" ${BENCH_ARGS:-} > "$OUT/bench.log" 2>&1
  echo "[$(el) s] bench: exit $?"; grep -E "x\)|min_speedup|TP MLP" "$OUT/bench.log" | tail -16
fi
if has redistribute; then
  RTIME=${RTIME:-150}; timeout $((RTIME + 60)) torchrun --nproc-per-node 2 python/gpu_tests/check_redistribute.py --out "$OUT" \
    --time-limit "$RTIME" > "$OUT/redistribute.log" 2>&1
  echo "[$(el) s] redistribute: exit $?"; tail -2 "$OUT/redistribute.log" | cut -c1-600
fi

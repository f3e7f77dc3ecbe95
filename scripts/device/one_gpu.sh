#!/usr/bin/env bash
# On a one-GPU machine (H100 or H200), one call: build; the NVLink transport with ranks sharing the GPU
# (executor_gpu_tests' SharedGpu.*, tests/executor/gpu/shared_gpu_test.cpp: ordering, copy-engine and kernel copies,
# fused kernels, eager and graph, every element checked; FILTER overrides); PY=1 adds the Python checks that run in
# one process, PY2=1 those that need two processes (on the one GPU); NODES=1 emulates nodes on the GPU with one
# process per rank (below). Files under $OUT. (compute-sanitizer over ranks sharing a GPU stalls: sanitize on 2 GPUs.)
set -uo pipefail
cd "$(dirname "$0")/../.."
export NCCL_NVLS_ENABLE=0
OUT=${OUT:-/tmp}
t0=$(date +%s); el() { echo $(( $(date +%s) - t0 )); }
bash scripts/device/build.sh > "$OUT/one_gpu.log" 2>&1 || { tail -40 "$OUT/one_gpu.log"; exit 1; }
{ date -u; nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv; } >> "$OUT/one_gpu.log" 2>&1
echo "[$(el) s] built"
S=build-device/tests/executor_gpu_tests
timeout $(( ${BUDGET:-300} - $(el) - 5 )) $S --gtest_also_run_disabled_tests --gtest_filter="${FILTER:-SharedGpu.*}" > "$OUT/shared_gpu.log" 2>&1; echo "shared gpu tests exit $?"
grep -E "^\[ +(OK|FAILED|PASSED|SKIPPED) |^mesh|shared GPU:|Failure|wrong|error" "$OUT/shared_gpu.log" | head -40
# PY=1: the Python GPU checks that run on one process (torchrun --nproc-per-node 1).
if [[ "${PY:-0}" == 1 ]]; then
  export PYTHONPATH="$PWD/build-device/python${PYTHONPATH:+:$PYTHONPATH}"
  timeout $(( ${BUDGET:-300} - $(el) - 5 )) torchrun --nproc-per-node 1 python/tests/gpu/check_block_scaled.py \
    --out "$OUT" > "$OUT/block_scaled.log" 2>&1; echo "check_block_scaled.py (1 process) exit $?"
  grep -E "FAIL|checks passed|Error|error" "$OUT/block_scaled.log" | head -20
fi
# PY2=1: the Python GPU checks that need several processes (CHECKS: check names, default move_state_dict and
# block_scaled, or scripts' paths; CHECK_ARGS: more arguments for each), NPROC of them (default 2) on the one GPU, each
# its own NCCL host (as NODES=1 below): correctness, and host times (the GPU's times are not comparable: the processes
# time-slice it).
if [[ "${PY2:-0}" == 1 ]]; then
  export PYTHONPATH="$PWD/build-device/python${PYTHONPATH:+:$PYTHONPATH}"
  for check in ${CHECKS:-move_state_dict block_scaled}; do
    script=$([[ $check == *.py ]] && echo "$check" || echo "python/tests/gpu/check_$check.py")
    name=$(basename "$script" .py)
    timeout $(( ${BUDGET:-300} - $(el) - 5 )) torchrun --nproc-per-node "${NPROC:-2}" --no-python bash -c \
      'LOCAL_RANK=0 NCCL_HOSTID=host$RANK NCCL_SOCKET_IFNAME=lo NCCL_IB_DISABLE=1 exec python3 "$0" "$@"' \
      "$script" --out "$OUT" ${CHECK_ARGS:-} > "$OUT/procs_$name.log" 2>&1
    echo "[$(el) s] $name.py (${NPROC:-2} processes, one GPU) exit $?"
    grep -E "FAIL|checks passed|Error|error|event" "$OUT/procs_$name.log" | cut -c1-600 | head -12
  done
fi
# BUFFERS=1: `reshard run --buffers same|cached|new` on two processes sharing the GPU (an NCCL host each), both
# transports: every buffer set verified (correctness only: the processes share one GPU).
if [[ "${BUFFERS:-0}" == 1 ]]; then
  source scripts/device/lib.sh
  R=build-device/tools/reshard
  for tr in nvlink nccl; do
    for b in same cached new; do
      host_processes "$OUT/buffers.txt" 2 run --iters 10 --mesh 2 --from S0 --to S1 --shape 4096x4096 --dtype bf16 \
        --transport $tr --buffers $b
    done
  done
  echo "[$(el) s] buffers on one GPU"; grep -E "verified|error" "$OUT/buffers.txt" | cut -c1-200
fi
# NODES=1: nodes emulated on the one GPU, one process per rank, each its own "host" for NCCL (lib.sh host_processes):
# plans for 2 ranks per node run their steps within a node one-sided (IPC between the processes) and between nodes on
# NCCL's sockets: (4) P -> R as the hierarchical all_reduce with one-sided node stages, with NCCL's node stages, and
# flat (the first also captured in CUDA graphs); the two-node emulation's cases as auto plans them; every element
# verified; `calibrate` between two such processes.
if [[ "${NODES:-0}" == 1 ]]; then
  source scripts/device/lib.sh
  R=build-device/tools/reshard
  export NCCL_NVLS_ENABLE=0
  $R plan --mesh 4 --from P --to R --shape 1024x1024 --ranks-per-node 2 --strategy collective --transport nccl \
    --json "$OUT/plan_hier.json" > /dev/null
  python3 - "$OUT/plan_hier.json" "$OUT" <<'PY'
import json, sys
p = json.load(open(sys.argv[1]))
assert p["steps"][0].get("hierarchical"), p["steps"][0]
mixed = json.loads(json.dumps(p)); mixed["steps"][0]["mixed"] = True
flat = json.loads(json.dumps(p)); flat["steps"][0].pop("hierarchical")
json.dump(mixed, open(sys.argv[2] + "/plan_mixed.json", "w")); json.dump(flat, open(sys.argv[2] + "/plan_flat.json", "w"))
PY
  for form in mixed hier flat; do
    $R plan --load "$OUT/plan_$form.json" --json "$OUT/priced_$form.json" > /dev/null
    host_processes "$OUT/nodes.txt" 4 run --iters 20 --plan "$OUT/priced_$form.json"
  done
  host_processes "$OUT/nodes.txt" 4 run --iters 20 --graph --plan "$OUT/priced_mixed.json"
  # The two-node emulation's cases (two_nodes.sh) as auto plans them with the built-in profile at 64 MiB: relayed,
  # plain, mixed, hierarchical with one-sided node stages, and mixed relayed between meshes; every element verified.
  for c in "--mesh 4 --from S0 --to R" "--mesh 2x2 --from S0,S1 --to S1,S0" "--mesh 2x2 --from S0,S0 --to S1,S1" \
           "--mesh 4 --from P --to R" \
           "--from-mesh 2 --from-ranks 0,1 --to-mesh 2 --to-ranks 2,3 --world-size 4 --from S0 --to R"; do
    echo "$($R plan $c --shape 4096x4096 --ranks-per-node 2 | grep '^\*' | cut -c1-150)" >> "$OUT/nodes.txt"
    host_processes "$OUT/nodes.txt" 4 run --iters 5 --warmup 2 $c --shape 4096x4096 --ranks-per-node 2
  done
  host_processes "$OUT/nodes.txt" 2 calibrate --nccl-link inter_node --sizes 1MiB,16MiB --iters 5 --no-mapping \
    --out "$OUT/calibrated_processes.json"
  echo "[$(el) s] nodes on one GPU"; cut -c1-250 "$OUT/nodes.txt"
fi
echo "[$(el) s] done"

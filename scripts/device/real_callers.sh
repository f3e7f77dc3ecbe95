#!/usr/bin/env bash
# On a 2- or 4-GPU machine, one call (BUDGET seconds, default 575): reshard with the buffers real callers hand it.
# PARTS (default "cpp buffers fresh stages model alloc"): cpp: executor_gpu_tests' batches and one-process-per-GPU tests (IPC);
# fresh: python/tests/gpu/check_fresh_buffers.py on every GPU (fresh, reused, freed and reallocated buffers,
# redistribute_many forward and backward); alloc: the same under expandable segments and cudaMallocAsync, and the
# Llama-3-8B set under both; model: python/bench/model_sync.py (SETS, default every set); stages: the host time of
# each stage of a repeat call (python/bench/call_stages.py); batch: `reshard bench --batch 100` of 1 MiB tensors
# against one of 100 MiB, S0/S1/R pairs, both transports (COALESCE: --coalesce-bytes values); llama_cpp: the moving
# tensors of the Llama-3-8B set as one traced C++ batch (`reshard run`), both transports; weights: the weight sync
# between meshes (python/tests/gpu/check_move_state_dict.py and check_block_scaled.py, then python/bench/weight_sync.py,
# WEIGHT_CASES: its --cases, WEIGHT_ARGS: more of its flags, e.g. --wait-groups);
# buffers: `reshard run` one process per GPU on the same, cached and new buffers (--buffers), both transports, and
# `reshard calibrate`'s mapping figures (nvlink map_us, first_map_us). Every result verified.
# Files under $OUT/real_callers.tgz.
set -uo pipefail
cd "$(dirname "$0")/../.."
source scripts/device/lib.sh
archive_begin real_callers || exit 1
N=$(nvidia-smi -L | wc -l)
PARTS=${PARTS:-cpp buffers fresh stages model alloc}
export PYTHONPATH="$PWD/build-device/python${PYTHONPATH:+:$PYTHONPATH}" OMP_NUM_THREADS=4 STACKS_EVERY_S=120
has() { [[ " $PARTS " == *" $1 "* ]]; }
torch_job() {  # torch_job NAME SECONDS SCRIPT ARGS...
  local name=$1 t=$2; shift 2
  ((t > $(left) - 5)) && t=$(( $(left) - 5 ))
  ((t < 20)) && { echo "$name: skipped ($(left) s left)"; return; }
  timeout $t torchrun --nproc-per-node $N "$@" > "$OUT/$name.log" 2>&1
  local rc=$?
  echo "[$(el) s] $name exit $rc"; grep -E "passed, |Error|^\{\"set|^\{\"shape|^# |fallback" "$OUT/$name.log" | cut -c1-1200 | head -12
}
if has cpp; then
  timeout 150 build-device/tests/executor_gpu_tests --gtest_filter='GpuBatch.*' > "$OUT/batch_gpu.log" 2>&1; rc=$?
  echo "[$(el) s] batch_gpu exit $rc"
  grep -E "^\[ +(OK|FAILED) \]|Failure" "$OUT/batch_gpu.log" | head -12
  timeout 150 build-device/tests/executor_gpu_tests --gtest_filter='GpuProcesses.*:Gpu.OneProcessPerRank:GpuChangingBuffers.*' \
    > "$OUT/processes.log" 2>&1; rc=$?; echo "[$(el) s] processes exit $rc"
  grep -E "^\[ +(OK|FAILED) \]|Failure" "$OUT/processes.log" | head -12
fi
if has buffers; then
  for shape in 4096x14336 4096x4096; do
    for tr in nvlink nccl; do
      for b in same cached new; do
        n_processes "$OUT/buffers.txt" $N --backend nccl --from S0 --to S1 --shape $shape --dtype bf16 --transport $tr \
          --iters 30 --buffers $b
      done
    done
  done
  echo "[$(el) s] buffers"; cat "$OUT/buffers.txt"
  timeout 240 $R calibrate --out "$OUT/calibrated.json" --sizes 1MiB,16MiB,256MiB --iters 5 > "$OUT/calibrate.log" 2>&1
  echo "[$(el) s] calibrate exit $?"; grep -o '"source": .*' "$OUT/calibrated.json" | grep -o "nvlink map_us.*" | cut -c1-400
fi
has fresh && torch_job fresh 120 python/tests/gpu/check_fresh_buffers.py --out "$OUT"
if has rows; then  # peer copies of narrow rows: copy engines (the profile's rule) against the copy kernel
  python3 -c "import json; p = json.load(open('bench/profiles/h100x2.json')); p['name'] = 'kernel peer copies'
p['nvlink']['copy_engine_min_row_bytes'] = 1 << 40; json.dump(p, open('/tmp/kernels.json', 'w'))"
  for shape in 4096x14336 4096x4096 16384x16384; do
    for prof in bench/profiles/h100x2.json /tmp/kernels.json; do
      two_processes "$OUT/rows.txt" --backend nccl --from S0 --to S1 --shape $shape --dtype bf16 --strategy p2p \
        --transport nvlink --iters 30 --profile $prof
    done
  done
  echo "[$(el) s] rows"; cat "$OUT/rows.txt"
fi
if has batch; then  # COALESCE: the --coalesce-bytes values to sweep ("default": the flag left out)
  for cb in ${COALESCE:-default}; do
    name=batch_100x1MiB extra=()
    [[ $cb != default ]] && name+=_coalesce$cb extra=(--coalesce-bytes "$cb")
    timeout 200 $R bench --backend nccl --batch 100 --meshes $N --sizes 1MiB --dtypes f32 --placements S0,S1,R \
      --strategies collective,p2p --transports nccl,nvlink --iters 50 --warmup 10 --csv "$OUT/$name.csv" \
      "${extra[@]}" > "$OUT/$name.log" 2>&1
    echo "[$(el) s] $name exit $?"; grep -vE "^#" "$OUT/$name.log" | cut -c1-140 | head -40
    grep -E "wrong" "$OUT/$name.log" | tail -1
  done
fi
if has llama_cpp; then  # the Llama-3-8B rowwise and norm tensors (the ones that move) as one C++ batch, traced
  ts=(--shape 4096x4096 --from S0 --to S1 --dtype bf16)
  for _ in $(seq 31); do ts+=(--tensor 4096x4096:S0:S1:bf16); done
  for _ in $(seq 32); do ts+=(--tensor 4096x14336:S0:S1:bf16); done
  for _ in $(seq 65); do ts+=(--tensor 4096:S0:R:bf16); done
  for tr in nccl nvlink; do
    timeout 100 $R run --backend nccl --mesh $N --transport $tr --trace --iters 20 "${ts[@]}" > "$OUT/llama_cpp_$tr.log" 2>&1
    echo "[$(el) s] llama_cpp $tr exit $?"; grep -vE "^\s*$" "$OUT/llama_cpp_$tr.log" | cut -c1-220 | tail -8
  done
fi
has stages && torch_job stages 60 python/bench/call_stages.py --out "$OUT" --iters 60
has model && torch_job model 240 python/bench/model_sync.py --out "$OUT" --sets "${SETS:-llama3_8b,llama3_70b_8l,qwen3_moe_layer}"
has weights && torch_job move_state_dict 120 python/tests/gpu/check_move_state_dict.py --out "$OUT"
has weights && torch_job block_scaled 60 python/tests/gpu/check_block_scaled.py --out "$OUT"
has weights && torch_job weight_sync 300 python/bench/weight_sync.py --out "$OUT" ${WEIGHT_CASES:+--cases "$WEIGHT_CASES"} \
  ${WEIGHT_ARGS:-}
if has alloc; then
  for conf in expandable_segments:True backend:cudaMallocAsync; do
    tag=${conf%%:*}
    PYTORCH_CUDA_ALLOC_CONF=$conf torch_job "fresh_$tag" 90 python/tests/gpu/check_fresh_buffers.py --out "$OUT"
    PYTORCH_CUDA_ALLOC_CONF=$conf torch_job "model_$tag" 90 python/bench/model_sync.py --out "$OUT/$tag" --sets llama3_8b --no-single
  done
fi
archive_end

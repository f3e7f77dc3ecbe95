#!/usr/bin/env bash
# On the 2-GPU machine: how fast a local step's copy runs on the copy engines (cudaMemcpyAsync / cudaMemcpy2DAsync)
# against the copy kernel, by row width. `reshard run` of R->S1 (each rank copies half the columns: rows of half the
# row) and R->S0 (one contiguous block) on mesh (2), f32, 64 MiB-1 GiB tensors, planned with the built-in profile and
# with COPY_PROFILE (default: the built-in profile with copy_engine_min_row_bytes raised past any row, so every copy
# runs on the kernel). Then, with BENCH (default on), bench_torch.py (BENCH_ARGS). Files under $OUT: local_copies.txt,
# bench.json/.log.
set -uo pipefail
cd "$(dirname "$0")/../.."
source scripts/device/lib.sh
device_begin || exit 1
echo "[$(el) s] built"
export PYTHONPATH="$PWD/build-device/python${PYTHONPATH:+:$PYTHONPATH}" OMP_NUM_THREADS=4
python3 - "$OUT/kernel_profile.json" <<'EOF'
import json, subprocess, sys
p = json.load(open("bench/profiles/h100x2.json"))
p["name"] = "h100x2, every copy on the kernel"
p["nvlink"]["copy_engine_min_row_bytes"] = 1 << 40
json.dump(p, open(sys.argv[1], "w"), indent=1)
EOF
KP=${COPY_PROFILE:-$OUT/kernel_profile.json}
: > "$OUT/local_copies.txt"
for pair in "R S1" "R S0"; do
  set -- $pair
  for shape in ${SHAPES:-65536x1024 32768x2048 16384x4096 8192x8192 4096x16384 2048x32768 4096x4096 16384x16384}; do
    for prof in builtin kernel; do
      timeout 60 $R run --backend nccl --mesh 2 --shape $shape --from $1 --to $2 --iters 30 \
        $([ $prof = kernel ] && echo --profile "$KP") > "$OUT/run.txt" 2>&1
      echo "$1->$2 $shape $prof | $(grep -E '^  ' "$OUT/run.txt" | tail -1) | $(grep -E 'verified' "$OUT/run.txt")" \
        | tee -a "$OUT/local_copies.txt"
    done
  done
done
echo "[$(el) s] local copies done"
if [ "${BENCH:-1}" = 1 ]; then
  timeout 300 torchrun --nproc-per-node 2 python/bench/bench_torch.py --out "$OUT" ${BENCH_ARGS:-} > "$OUT/bench.log" 2>&1
  echo "[$(el) s] bench: exit $?"; grep -E "x\)|min_speedup|TP MLP" "$OUT/bench.log" | tail -24
fi

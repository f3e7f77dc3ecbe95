#!/usr/bin/env bash
# On the GPU machine: build reshard (CUDA) with its Python package, then the GPU checks of reshard.torch and the Python
# benchmark, each under torchrun with one process per GPU; results and logs under $OUT (default /tmp/reshard-python).
#   NPROC=2 (GPUs), BUDGET=570 (seconds for everything; a part that would not fit is skipped and says so),
#   PARTS="redistribute tp_mlp move_state_dict block_scaled bench example" (which parts), SKIP_BUILD=1 (build-device/ is already
#   built),
#   RTIME (seconds for check_redistribute.py's cases; default a third of what is left after the build)
set -uo pipefail
cd "$(dirname "$0")/../../.."
OUT=${OUT:-/tmp/reshard-python}
NPROC=${NPROC:-2}
BUDGET=${BUDGET:-570}
mkdir -p "$OUT"
start=$SECONDS
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 OMP_NUM_THREADS=4
PARTS=${PARTS:-redistribute tp_mlp move_state_dict block_scaled bench example}
if [[ "${SKIP_BUILD:-0}" != 1 ]]; then
  bash scripts/device/build.sh > "$OUT/build.log" 2>&1 || { cat "$OUT/build.log"; exit 1; }
  grep -E "reshard: (Python|dlpack|CUDA)" /tmp/configure.log | tee "$OUT/configure.txt"
fi
test -f build-device/python/reshard/__init__.py && ls build-device/python/reshard/_cuda*.so > /dev/null ||
  { echo "the Python package or its CUDA module was not built"; exit 1; }
export PYTHONPATH="$PWD/build-device/python${PYTHONPATH:+:$PYTHONPATH}"
echo "build: $((SECONDS - start)) s" | tee "$OUT/status.txt"

# part NAME NEED_SECONDS SCRIPT ARGS...: runs one torchrun job unless fewer than NEED_SECONDS of the budget are left.
part() {
  local name=$1 need=$2; shift 2
  [[ " $PARTS " == *" $name "* ]] || return 0
  local left=$((BUDGET - (SECONDS - start)))
  if ((left < need)); then echo "$name: skipped ($left s of the budget left, needs $need)" | tee -a "$OUT/status.txt"; return; fi
  timeout $((left - 5)) torchrun --nproc-per-node "$NPROC" "$@" > "$OUT/$name.log" 2>&1
  echo "$name: exit $? after $((SECONDS - start)) s" | tee -a "$OUT/status.txt"
  grep -vE "^\s*$" "$OUT/$name.log" | tail -4
}
export STACKS_EVERY_S=${STACKS_EVERY_S:-120}  # a rank still running then prints its Python stack (common.setup)
left=$((BUDGET - (SECONDS - start)))
part redistribute 60 python/tests/gpu/check_redistribute.py --out "$OUT" --time-limit "${RTIME:-$((left / 3))}"
part tp_mlp 120 python/tests/gpu/check_tp_mlp.py --out "$OUT"
part move_state_dict 60 python/tests/gpu/check_move_state_dict.py --out "$OUT"
part block_scaled 40 python/tests/gpu/check_block_scaled.py --out "$OUT"
part bench 60 python/bench/bench_torch.py --out "$OUT"
part example 20 python/examples/dtensor_redistribute.py
cat "$OUT/status.txt"

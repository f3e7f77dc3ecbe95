#!/usr/bin/env bash
# On the 2-GPU machine: the nvlink runs that failed, each once (output and exit code), with a gdb backtrace on a signal.
# Everything goes to $OUT/crash.txt (one file).
set -uo pipefail
cd "$(dirname "$0")/../.."
export NCCL_NVLS_ENABLE=0
OUT=${OUT:-/tmp}; R=build-device/tools/reshard; L="$OUT/crash.txt"
bash scripts/device/build.sh -DCMAKE_CXX_FLAGS=-g -DCMAKE_CUDA_FLAGS=-lineinfo > "$L" 2>&1 || { cat "$L"; exit 1; }
case_() {
  echo "== $*" >> "$L"
  timeout 40 $R run --backend nccl --mesh 2 --iters 3 "$@" >> "$L" 2>&1; local rc=$?
  echo "rc=$rc" >> "$L"
  if [ $rc -ge 128 ] || [ $rc -eq 124 ]; then
    timeout 60 gdb -q -batch -ex run -ex "thread apply all bt 15" --args $R run --backend nccl --mesh 2 --iters 1 "$@" 2>&1 \
      | grep -E "^#|signal|SIG" | grep -v "in ?? ()" | head -50 >> "$L"
  fi
}
case_ --from S0 --to S1 --shape 1024x1024 --strategy p2p --transport nvlink --fuse never
case_ --from S0 --to R --shape 256x256 --strategy p2p --transport nvlink --fuse never
case_ --from S0 --to S1 --shape 1024x1024 --strategy p2p --transport nvlink --fuse always
case_ --from S0 --to S1 --shape 4096x4096
case_ --from S0 --to S1 --shape 1024x1024 --strategy p2p --transport nvlink --fuse never --graph
case_ --from P --to S0 --shape 4096x4096 --strategy p2p --transport nvlink
cat "$L" | grep -vE "^# (algbw|reshard run)" | cut -c1-220

#!/usr/bin/env bash
# On the 2-GPU machine, one call: build; whether the Python modules carry their own copy of libstdc++ (two copies of
# the locale machinery in one process crash in the first ostream use: seen on this machine), and if so the link
# flags behind it and a relink without them; the dead-rank and one-process-per-rank GPU tests; the Python GPU checks
# in what is left of BUDGET seconds. Files under $OUT.
set -uo pipefail
cd "$(dirname "$0")/../.."
source scripts/device/lib.sh
BUDGET=${BUDGET:-400}
t0=$(date +%s); el() { echo $(( $(date +%s) - t0 )); }
env | grep -iE "FLAGS|^CC=|^CXX=" | sed 's/^/env: /'
device_setup > "$OUT/build.txt" 2>&1 || { tail -30 "$OUT/build.txt"; exit 1; }
echo "[$(el) s] built"
copies() { nm -C build-device/python/reshard/_core*.so 2>/dev/null | grep -c "read_utf8_code_point"; }
echo "libstdc++ internals in _core: $(copies)"
if [ "$(copies)" -gt 0 ]; then
  ninja -C build-device -t commands python/_core 2>/dev/null | tail -1 | tr ' ' '\n' | grep -E "static|^-l|\.a$|^-Wl" | sort -u | head -20
  grep -E "LINKER_FLAGS:|CMAKE_CXX_FLAGS:" build-device/CMakeCache.txt
  env -u LDFLAGS cmake -S . -B build-device -DCMAKE_MODULE_LINKER_FLAGS= -DCMAKE_SHARED_LINKER_FLAGS= > /dev/null 2>&1
  cmake --build build-device --parallel "$(nproc)" > "$OUT/relink.txt" 2>&1; echo "relink exit $?"
  echo "after relink: $(copies)"
fi
export PYTHONPATH="$PWD/build-device/python"
timeout 60 /opt/torch/.venv/bin/python -X faulthandler -c '
import torch, reshard
print("reshard.plan:", reshard.plan([2], "S0", "S1", [8192, 8192], "f32").strategy)' 2>&1 | tail -4
echo "[$(el) s] python plan"
timeout 120 $T --gtest_filter='Gpu.ARankProcessThatDies*:Gpu.OneProcessPerRank:Gpu.NvlinkPeerThatStopsArriving*' \
  > "$OUT/fault_tests.log" 2>&1; echo "fault tests exit $?"
grep -E "^\[ +(OK|FAILED) \]|Failure|^fault|after [0-9.]+ s" "$OUT/fault_tests.log" | cut -c1-400 | head -20
echo "[$(el) s] fault tests"
OUT=$OUT/python SKIP_BUILD=1 BUDGET=$(( BUDGET - $(el) )) RTIME=45 PARTS="redistribute tp_mlp example bench" \
  bash python/gpu_tests/run_all.sh 2>&1 | tail -30
echo "[$(el) s] done"

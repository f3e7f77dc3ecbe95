#!/usr/bin/env bash
# On the 2-GPU machine, one call: build; the Python modules' own libstdc++ symbols (local since python/CMakeLists.txt
# links with --exclude-libs,ALL); the planner from Python after torch; the Python GPU checks in what is left of BUDGET.
set -uo pipefail
cd "$(dirname "$0")/../.."
source scripts/device/lib.sh
BUDGET=${BUDGET:-230}
t0=$(date +%s); el() { echo $(( $(date +%s) - t0 )); }
device_setup > "$OUT/build.txt" 2>&1 || { tail -30 "$OUT/build.txt"; exit 1; }
echo "[$(el) s] built; exported libstdc++ symbols in _core: $(nm -D --defined-only build-device/python/reshard/_core*.so | grep -c "_ZNS")"
export PYTHONPATH="$PWD/build-device/python"
timeout 60 /opt/torch/.venv/bin/python -X faulthandler -c '
import torch, reshard
print("reshard.plan:", reshard.plan([2], "S0", "S1", [8192, 8192], "f32").strategy)' 2>&1 | tail -4
OUT=$OUT/python SKIP_BUILD=1 BUDGET=$(( BUDGET - $(el) )) RTIME=40 PARTS="redistribute example tp_mlp bench" \
  bash python/gpu_tests/run_all.sh 2>&1 | tail -30
echo "[$(el) s] done"

#!/usr/bin/env bash
# On a GPU machine, one call: build; reshard's planner from Python in one process, with and without torch imported
# first, under cuda-gdb for the native stack of a crash. Files under $OUT.
set -uo pipefail
cd "$(dirname "$0")/../.."
source scripts/device/lib.sh
device_setup > "$OUT/build.txt" 2>&1 || { tail -30 "$OUT/build.txt"; exit 1; }
export PYTHONPATH="$PWD/build-device/python" PYTHONFAULTHANDLER=1
PY=/opt/torch/.venv/bin/python
cat > /tmp/plan_only.py <<'P'
import sys
if sys.argv[1] == "torch":
    import torch  # noqa: F401
from reshard import _core
a = _core.PlanArgs()
a.mesh, a.src, a.dst, a.shape, a.dtype, a.strategy = "2", "S0", "S1", "8x6", "f32", "auto"
a.ranks_per_node = 2
print("plan:", _core.make_plan(a, None).strategy, flush=True)
import reshard
print("reshard.plan:", reshard.plan([2], "S0", "S1", [8192, 8192], "f32").strategy, flush=True)
P
for mode in plain torch; do
  echo "== $mode"; timeout 60 $PY /tmp/plan_only.py $mode 2>&1 | tail -12
done
echo "== cuda-gdb, torch"
timeout 120 /usr/local/cuda/bin/cuda-gdb -q -batch -ex run -ex "bt 40" -ex "info sharedlibrary" --args $PY /tmp/plan_only.py torch \
  > "$OUT/gdb.txt" 2>&1
grep -E "^#[0-9]+|SIGSEGV|received signal" "$OUT/gdb.txt" | head -45
grep -iE "fmt|json|stdc\+\+|reshard|_core" "$OUT/gdb.txt" | grep -v "^#" | head -20

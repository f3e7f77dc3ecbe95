#!/usr/bin/env bash
# On the 2-GPU machine, one call: build, then python/bench/profile_calls.py under torchrun (host time per call of
# DTensor.redistribute, reshard.torch.redistribute and their parts; cProfile of the reshard calls) into
# $OUT/profile_python.tgz. CALLERS=REGEX: also who calls the functions matching it. THEN="...": a command to run
# after the profile in the same call (e.g. the GPU checks: SKIP_BUILD=1 bash python/gpu_tests/run_all.sh).
set -uo pipefail
cd "$(dirname "$0")/../.."
source scripts/device/lib.sh
archive_begin profile_python || exit 1
export PYTHONPATH="$PWD/build-device/python${PYTHONPATH:+:$PYTHONPATH}" OMP_NUM_THREADS=4
timeout 200 torchrun --nproc-per-node "${NPROC:-2}" python/bench/profile_calls.py --calls "${CALLS:-300}" \
  ${CALLERS:+--callers "$CALLERS"} > "$OUT/profile.log" 2>&1
echo "exit $?"
grep -vE "^\[rank|Warning|warn" "$OUT/profile.log" | head -${LINES_SHOWN:-120}
if [ -n "${THEN:-}" ]; then OUT=$OUT/then bash -c "$THEN" 2>&1 | tail -40; fi
archive_end

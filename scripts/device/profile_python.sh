#!/usr/bin/env bash
# On the 2-GPU machine, one call: build, then python/bench/profile_calls.py under torchrun (host time per call of
# DTensor.redistribute, reshard.torch.redistribute and their parts; cProfile of the reshard calls) into
# $OUT/profile_python.tgz.
set -uo pipefail
cd "$(dirname "$0")/../.."
source scripts/device/lib.sh
archive_begin profile_python || exit 1
export PYTHONPATH="$PWD/build-device/python${PYTHONPATH:+:$PYTHONPATH}" OMP_NUM_THREADS=4
timeout 200 torchrun --nproc-per-node "${NPROC:-2}" python/bench/profile_calls.py --calls "${CALLS:-300}" \
  > "$OUT/profile.log" 2>&1
echo "exit $?"
grep -vE "^\[rank|Warning|warn" "$OUT/profile.log" | head -120
archive_end

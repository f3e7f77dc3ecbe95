#!/usr/bin/env bash
# One call on 2 GPUs: where do ranks sharing GPUs stall (tests/shared_gpu_test.cpp, every run printed)? The three
# every-pair tests, once per variant, each test in its own process: pushes on 2 GPUs (posts to ranks of the process
# as stream write-values, the default), a second pass of the same, kernel pulls, every rank on GPU 0 alone, and posts
# as copy-engine copies (RESHARD_FLAG_POSTS=copy). Full logs in shared_diag.tgz; prints
# per variant and test the result and the run that stalled.
set -uo pipefail
cd "$(dirname "$0")/../.."
source scripts/device/lib.sh
archive_begin shared_diag || exit 1
S=build-device/tests/shared_gpu_tests
for v in ${VARIANTS:-push again pull gpu0 copy}; do
  case $v in
    push|again) E="" ;;
    copy) E="RESHARD_FLAG_POSTS=copy" ;;
    pull) E="RESHARD_TEST_ONE_PROCESS_COPIES=pull" ;;
    gpu0) E="CUDA_VISIBLE_DEVICES=0" ;;
  esac
  for t in EveryPairOnMeshes2And3And4And1x2And2x1 EveryPairOnMesh2x2 EveryPairBetweenMeshes; do
    [ "$(left)" -lt 40 ] && break
    env $E RESHARD_TEST_VERBOSE=1 timeout ${TEST_S:-100} $S --gtest_filter="SharedGpu.$t" > "$OUT/${v}_$t.log" 2>&1
    rc=$?
    last=$(grep -E "^  run " "$OUT/${v}_$t.log" | tail -1)
    echo "[$(el) s] $v $t: exit $rc; last run: $last"
    [ $rc -ne 0 ] && grep -m1 "exception\|Failure" "$OUT/${v}_$t.log" | cut -c1-900
  done
done
archive_end

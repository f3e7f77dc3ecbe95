#!/usr/bin/env bash
# Quick start, command 2: install dependencies, build, and run every test suite:
#   1. the release build's tests (GPU tests skip where no GPU is);
#   2. the sanitizer suite: the CPU tests again under AddressSanitizer + UndefinedBehaviorSanitizer (preset asan);
#   3. the fuzz smoke: every libFuzzer target for 15 s over its seed corpus (preset fuzz, clang).
# RESHARD_TEST_SUITES selects suites (default "release asan fuzz"). Extra arguments go to the release configure.
set -euo pipefail
cd "$(dirname "$0")/.."
suites=${RESHARD_TEST_SUITES:-release asan fuzz}
scripts/install_deps.sh
jobs=$(nproc)
if [[ " $suites " == *" release "* ]]; then
  echo "== release build and tests"
  scripts/build.sh "$@"
  ctest --test-dir build --output-on-failure --timeout 1800 -j "$jobs"
fi
if [[ " $suites " == *" asan "* ]]; then
  echo "== sanitizer suite (ASan + UBSan)"
  cmake --preset asan > /dev/null
  cmake --build build-asan --parallel "$jobs"
  ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
    ctest --test-dir build-asan --output-on-failure --timeout 1800 -j "$jobs" -E package_consumer
  # (package_consumer links an uninstrumented project against the installed package: checked in the release suite)
fi
if [[ " $suites " == *" fuzz "* ]]; then
  echo "== fuzz smoke"
  cmake --preset fuzz > /dev/null
  cmake --build build-fuzz --parallel "$jobs"
  scripts/fuzz_smoke.sh 15
fi

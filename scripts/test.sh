#!/usr/bin/env bash
# Quick start, command 2: install dependencies, build, and run every test suite:
#   1. release: the release build and all its tests (GPU tests skip where no GPU is; the package consumers; the Python
#      package pip installed into a fresh virtual environment and its tests run there; the docs' examples run);
#   2. asan:    the CPU tests again under AddressSanitizer + UndefinedBehaviorSanitizer (preset asan), and the Python
#               package's hostile-input tests with the instrumented extension (python_asan_tests);
#   3. fuzz:    every libFuzzer target for 15 s over its seed corpus (preset fuzz, clang).
# At the end it prints each suite's build and test times (wall clock, and CPU time of all processes).
#
# RESHARD_TEST_SUITES selects suites (default "release asan fuzz"). RESHARD_TEST_TIER=full runs every case of the
# exhaustive suites (the GPU device scripts do); the default fast tier runs a fixed sample of their largest case
# lists (tests/support/test_tier.hpp), and the sanitizer suite a quarter of that (the sanitizer tier). Extra arguments go to
# the release configure.
set -euo pipefail
cd "$(dirname "$0")/.."
suites=${RESHARD_TEST_SUITES:-release asan fuzz}
jobs=$(nproc)
export LC_NUMERIC=C
export RESHARD_TEST_TIER=${RESHARD_TEST_TIER:-fast}
# The tests' CUDA kernels are built for one architecture (sm_90: H100/H200), not the package default 80;90: half the
# nvcc time, and CI machines have no GPU to run them anyway. Both C++ builds are unity builds (RESHARD_UNITY_BUILD).
export CUDAARCHS=${CUDAARCHS:-90}

timings=()
script_start=$(date +%s.%N)
# timed LABEL COMMAND...: runs COMMAND and records its wall and CPU (user + system, children included) seconds.
timed() {
  local label=$1
  shift
  local start cpu_before cpu_after rc=0
  start=$(date +%s.%N)
  cpu_seconds
  cpu_before=$cpu
  "$@" || rc=$?
  cpu_seconds
  cpu_after=$cpu
  timings+=("$(awk -v l="$label" -v s="$start" -v e="$(date +%s.%N)" -v a="$cpu_before" -v b="$cpu_after" \
    -v r="$rc" 'BEGIN { printf "%-26s %8.1f %8.1f%s", l, e - s, b - a, r ? "  (failed)" : "" }')")
  return $rc
}
# Sets cpu to the user + system seconds of this shell's finished children, from bash's `times` (its second line).
# `times` must run in this shell, not in a pipeline or a $(...) subshell: it writes to a file.
times_file=$(mktemp)
cpu_seconds() {
  times > "$times_file"
  cpu=$(awk 'NR == 2 {
    s = 0
    for (i = 1; i <= 2; i++) { m = $i; sub(/m.*/, "", m); x = $i; sub(/^[0-9]+m/, "", x); sub(/s$/, "", x)
                               s += m * 60 + x }
    printf "%.2f", s }' "$times_file")
}
summary() {
  local rc=$?
  if ((${#timings[@]})); then
    echo
    echo "== times (tier ${RESHARD_TEST_TIER}, ${jobs} cores)"
    printf '%-26s %8s %8s\n' "step" "wall s" "cpu s"
    printf '%s\n' "${timings[@]}"
    cpu_seconds
    awk -v s="$script_start" -v e="$(date +%s.%N)" -v c="$cpu" \
      'BEGIN { printf "%-26s %8.1f %8.1f\n", "total", e - s, c }'
  fi
  rm -f "$times_file"
  return $rc
}
trap summary EXIT

timed "install dependencies" scripts/install_deps.sh
if [[ " $suites " == *" release "* ]]; then
  echo "== release build and tests"
  timed "release: build" scripts/build.sh -DRESHARD_UNITY_BUILD=ON "$@"
  timed "release: tests" ctest --test-dir build --output-on-failure --timeout 1800 -j "$jobs"
fi
if [[ " $suites " == *" asan "* ]]; then
  echo "== sanitizer suite (ASan + UBSan)"
  timed "asan: configure" cmake --preset asan > /dev/null
  timed "asan: build" cmake --build build-asan --parallel "$jobs"
  # The package tests link uninstrumented projects against the installed package: checked in the release suite.
  # The fast tier becomes the sanitizer tier there (tests/support/test_tier.hpp: a quarter of the largest enumerations).
  asan_tier=$RESHARD_TEST_TIER
  [[ $asan_tier == fast ]] && asan_tier=sanitizer
  RESHARD_TEST_TIER=$asan_tier ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 \
    UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
    timed "asan: tests" ctest --test-dir build-asan --output-on-failure --timeout 1800 -j "$jobs" -E "^package_"
fi
if [[ " $suites " == *" fuzz "* ]]; then
  echo "== fuzz smoke"
  timed "fuzz: configure" cmake --preset fuzz > /dev/null
  timed "fuzz: build" cmake --build build-fuzz --parallel "$jobs" --target fuzz_all
  timed "fuzz: smoke" scripts/fuzz_smoke.sh 15
fi

#!/usr/bin/env bash
# Fuzz smoke: runs every libFuzzer target for SECONDS (default 15) over its committed seed corpus. New inputs go
# to a temporary directory, so the committed corpus is read, never written. Exits non-zero on the first crash,
# leak, sanitizer report or timeout; the reproducer is kept in build-fuzz/artifacts/.
# Build first: cmake --preset fuzz && cmake --build build-fuzz
set -euo pipefail
cd "$(dirname "$0")/.."
seconds=${1:-15}
mkdir -p build-fuzz/artifacts
for target in text plan_json profile_json planner; do
  scratch=$(mktemp -d)
  echo "fuzz_${target}: ${seconds} s"
  if ! build-fuzz/fuzz/fuzz_${target} -max_total_time="${seconds}" -timeout=10 -rss_limit_mb=2048 \
      -print_final_stats=1 -artifact_prefix=build-fuzz/artifacts/${target}- \
      "${scratch}" "fuzz/corpus/${target}" > "build-fuzz/artifacts/${target}.log" 2>&1; then
    tail -n 40 "build-fuzz/artifacts/${target}.log"
    echo "fuzz_${target} failed; reproducer under build-fuzz/artifacts/" >&2
    rm -rf "${scratch}"
    exit 1
  fi
  grep -E "^(#[0-9]+ +DONE|stat::number_of_executed_units)" "build-fuzz/artifacts/${target}.log" || true
  rm -rf "${scratch}"
done

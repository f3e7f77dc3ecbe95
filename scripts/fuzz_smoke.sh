#!/usr/bin/env bash
# Fuzz smoke: runs every libFuzzer target (build-fuzz/fuzz/fuzz_*) for SECONDS (default 15) over its committed seed
# corpus fuzz/corpus/<name>, as many at once as there are cores. New inputs go to a temporary directory, so the
# committed corpus is read, never written. Exits non-zero if any target finds a crash, leak, sanitizer report or
# timeout; the reproducer is kept in build-fuzz/artifacts/.
# Build first: cmake --preset fuzz && cmake --build build-fuzz --target fuzz_all
set -euo pipefail
cd "$(dirname "$0")/.."
seconds=${1:-15}
jobs=$(nproc)
mkdir -p build-fuzz/artifacts
targets=()
for exe in build-fuzz/fuzz/fuzz_*; do
  [[ -x "$exe" && -f "$exe" ]] && targets+=("${exe#build-fuzz/fuzz/fuzz_}")
done
if ((${#targets[@]} == 0)); then
  echo "no fuzz targets under build-fuzz/fuzz/: build them first" >&2
  exit 1
fi

# fuzz_one NAME: one target's run; its log is build-fuzz/artifacts/NAME.log.
fuzz_one() {
  local target=$1 scratch
  scratch=$(mktemp -d)
  local rc=0
  build-fuzz/fuzz/fuzz_${target} -max_total_time="${seconds}" -timeout=10 -rss_limit_mb=2048 -print_final_stats=1 \
    -artifact_prefix=build-fuzz/artifacts/${target}- "${scratch}" "fuzz/corpus/${target}" \
    > "build-fuzz/artifacts/${target}.log" 2>&1 || rc=$?
  rm -rf "${scratch}"
  return $rc
}

failed=()
pids=()
names=()
finish() {  # waits for the oldest running target and reports it
  local rc=0
  wait "${pids[0]}" || rc=$?
  local target=${names[0]}
  pids=("${pids[@]:1}")
  names=("${names[@]:1}")
  if ((rc)); then
    tail -n 40 "build-fuzz/artifacts/${target}.log"
    echo "fuzz_${target} failed; reproducer under build-fuzz/artifacts/" >&2
    failed+=("$target")
  else
    echo "fuzz_${target}: $(grep -E '^stat::number_of_executed_units' "build-fuzz/artifacts/${target}.log" || echo ok)"
  fi
}
for target in "${targets[@]}"; do
  echo "fuzz_${target}: ${seconds} s"
  fuzz_one "$target" &
  pids+=($!)
  names+=("$target")
  if ((${#pids[@]} >= jobs)); then finish; fi
done
while ((${#pids[@]})); do finish; done
if ((${#failed[@]})); then
  echo "fuzz smoke failed: ${failed[*]}" >&2
  exit 1
fi

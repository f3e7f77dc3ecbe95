# Shared by the device scripts (source it after setting R, P (optional profile) and OUT).
# bench LABEL FLAGS...: one verified `reshard run` on NCCL; appends "LABEL | result row | verification" to
# $OUT/bench.txt and any --trace lines to $OUT/traces.txt.
bench() {
  local label=$1; shift
  $R run --backend nccl --iters 30 ${P:+--profile $P} "$@" > "$OUT/run.txt" 2>&1
  echo "$label | $(grep -E '^  ' "$OUT/run.txt" | tail -1) | $(grep -E 'verified' "$OUT/run.txt")" | tee -a "$OUT/bench.txt"
  if grep -qE "^# step" "$OUT/run.txt"; then
    grep -E "^# step" "$OUT/run.txt" >> "$OUT/traces.txt"
    echo "  ^ $label" >> "$OUT/traces.txt"
  fi
}
# sanitize BINARY FILTER: compute-sanitizer memcheck and racecheck over the light GPU suite, on reshard's kernels
# (API errors inside NCCL, which probes kernel images and peer access and handles the errors itself, not reported).
sanitize() {
  local bin=$1 filter=$2
  compute-sanitizer --version | head -2 > "$OUT/sanitizer.log"
  for tool in memcheck racecheck; do
    echo "== $tool" >> "$OUT/sanitizer.log"
    RESHARD_GPU_TESTS_LIGHT=1 timeout 150 compute-sanitizer --tool $tool --kernel-name kns=reshard \
      --report-api-errors no --error-exitcode 9 "$bin" --gtest_filter="$filter" >> "$OUT/sanitizer.log" 2>&1
    echo "exit $?" >> "$OUT/sanitizer.log"
  done
  grep -E "^== |ERROR SUMMARY|RACECHECK SUMMARY|exit |GPU SUMMARY|PASSED|FAILED" "$OUT/sanitizer.log"
}

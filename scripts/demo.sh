#!/usr/bin/env bash
# Quick start, command 1: install dependencies, build, and run the main job: plan the seed example and execute real
# redistributions, verified element by element (on the local GPUs with NCCL when there are enough, else on the host
# backend's CPU threads). The dependency and build output goes to build/demo.log (shown when a step fails); the
# last line says what was verified.
set -euo pipefail
cd "$(dirname "$0")/.."
mkdir -p build
log=build/demo.log
: > "$log"

# step TITLE COMMAND...: runs COMMAND with its output in the log; on failure shows the log's end and stops.
step() {
  local title=$1 start=$SECONDS rc=0
  shift
  printf '%s ... ' "$title"
  "$@" >> "$log" 2>&1 || rc=$?
  if ((rc)); then
    echo "failed (exit $rc); the end of $log:"
    tail -n 40 "$log"
    echo "demo: FAILED while ${title,} (full output: $log)"
    exit "$rc"
  fi
  echo "done ($((SECONDS - start)) s)"
}

# show COMMAND...: prints the command as typed, then runs it; its output also goes to the log, for the summary.
show() {
  echo
  echo "\$ reshard ${*:2}"
  "$@" | tee -a "$log"
}

step "installing dependencies" scripts/install_deps.sh
step "building (Release, every core)" scripts/build.sh
export NCCL_NVLS_ENABLE=0
reshard=build/tools/reshard
start_line=$(wc -l < "$log")
show $reshard plan --mesh 2x2 --from S0,S1 --to S1,S0 --shape 8192x8192 --dtype bf16 --strategy p2p
show $reshard run --mesh 2x2 --from S0,S1 --to S1,S0 --shape 4096x4096 --dtype bf16
show $reshard run --mesh 2 --from S0 --to S1 --shape 4096x4096 --dtype f32

# The summary, from the runs' own lines: "# reshard run: 4 ranks, host backend, ..." and "# verified N elements on
# R ranks: all correct; ...".
echo
tail -n +"$((start_line + 1))" "$log" | awk '
  /^# reshard run: / { backend = $6 }
  /^# verified / { runs++; elements += $3; if ($0 !~ /all correct/) wrong++ }
  END {
    if (runs != 2 || wrong) { printf "demo: FAILED: %d of 2 runs verified correct\n", runs - wrong; exit 1 }
    printf "demo: passed: planned [S0,S1]->[S1,S0] on a 2x2 mesh (p2p: only ranks 1 and 2 exchange data) and ran 2 " \
           "redistributions on the %s backend, %d elements verified, all correct\n", backend, elements }'

#!/usr/bin/env bash
# Peak RSS of `reshard run` with few and with many timed iterations: the difference must stay small (timing keeps a
# bounded sample and a ring of CUDA events, not a record per iteration). Usage:
#   bench/iters_memory.sh [BACKEND] [MANY]        (defaults: host, 3000000)
# Prints both peaks and their difference in MiB; exits 1 when the difference is 100 MiB or more.
set -euo pipefail
cd "$(dirname "$0")/.."
R=${RESHARD:-build/tools/reshard}
backend=${1:-host}
many=${2:-3000000}
peak() {  # peak RSS in KiB of one run
  /usr/bin/time -f "%M" "$R" run --mesh 2 --from S0 --to S1 --shape 256x256 --backend "$backend" --iters "$1" \
    --warmup 0 2>&1 >/dev/null | tail -1
}
few_kb=$(peak 10)
many_kb=$(peak "$many")
diff_mib=$(( (many_kb - few_kb) / 1024 ))
echo "backend $backend: peak RSS $((few_kb / 1024)) MiB with --iters 10, $((many_kb / 1024)) MiB with --iters $many: +$diff_mib MiB"
[ "$diff_mib" -lt 100 ]

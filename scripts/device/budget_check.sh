#!/usr/bin/env bash
# On the 2-GPU machine: budgeted plans as auto chooses them with the calibrated profile (stages priced at their
# chunk size) vs forced p2p; compute-sanitizer over the Partial and budget tests (row-based reduction kernel).
set -uo pipefail
cd "$(dirname "$0")/../.."
source scripts/device/lib.sh
device_setup || exit 1
P=bench/profiles/h200x2.json
for spec in "16384x16384 f32 32MiB" "16384x16384 bf16 16MiB" "8192x8192 f32 8MiB" "32768x16384 bf16 64MiB"; do
  set -- $spec
  bench "S0>S1 $1 $2 unlimited auto" --mesh 2 --from S0 --to S1 --shape $1 --dtype $2
  bench "S0>S1 $1 $2 budget $3 auto" --mesh 2 --from S0 --to S1 --shape $1 --dtype $2 --memory-budget $3
  bench "S0>S1 $1 $2 budget $3 p2p" --mesh 2 --from S0 --to S1 --shape $1 --dtype $2 --memory-budget $3 --strategy p2p
  bench "S0>S1 $1 $2 budget $3 collective" --mesh 2 --from S0 --to S1 --shape $1 --dtype $2 --memory-budget $3 --strategy collective
done
FILTER='Gpu.EveryDType:Gpu.Partial*:Gpu.MemoryBudget*'
sanitize "$T" "$FILTER"

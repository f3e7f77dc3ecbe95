#!/usr/bin/env bash
# On the 2-GPU machine: compute-sanitizer memcheck, racecheck and synccheck over the light in-process GPU tests that
# run reshard's kernels (copy, fused, pattern fill and check), pushed and pulled. Files under $OUT.
set -uo pipefail
cd "$(dirname "$0")/../.."
source scripts/device/lib.sh
device_begin || exit 1
sanitize "$T" "${FILTER:-Gpu.EveryPairAndStrategy*:Gpu.NvlinkStepsPulledAsKernelsEveryPair}"

#!/usr/bin/env bash
# Quick start, command 1: install dependencies, build, and run the main job: plan the seed example and execute a
# real redistribution, verified element by element (on the local GPUs with NCCL when there are enough, else on the
# host backend's CPU threads).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install_deps.sh
scripts/build.sh
export NCCL_NVLS_ENABLE=0
set -x
build/tools/reshard plan --mesh 2x2 --from S0,S1 --to S1,S0 --shape 8192x8192 --dtype bf16 --strategy p2p
build/tools/reshard run --mesh 2x2 --from S0,S1 --to S1,S0 --shape 4096x4096 --dtype bf16
build/tools/reshard run --mesh 2 --from S0 --to S1 --shape 4096x4096 --dtype f32

#!/usr/bin/env bash
# Quick start, command 1: install dependencies, build, and run the main job.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install_deps.sh
scripts/build.sh
set -x
build/tools/reshard layout --mesh 2x2 --placements S0,S0 --shape 10x5

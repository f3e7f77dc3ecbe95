#!/usr/bin/env bash
# Quick start, command 2: install dependencies, build, run every test (GPU tests skip where no GPU is).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install_deps.sh
scripts/build.sh "$@"
ctest --test-dir build --output-on-failure --timeout 1800 -j "$(nproc)"

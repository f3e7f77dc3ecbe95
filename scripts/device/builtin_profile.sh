#!/usr/bin/env bash
# On the 2-GPU machine, one call (BUDGET seconds, default 380): the built-in cost profile end to end, as it is since
# it carries the calibrated fits (2026-11-26). Build (archive_begin, with the Python package), then the mesh (2) sweep
# at 256 KiB-256 MiB f32 (every pair of R/S0/S1, every strategy and transport, auto's choice marked, every run
# verified) planned with the built-in profile (no --profile) and with bench/profiles/h100x2.json; then, in what is
# left, python/gpu_tests/run_all.sh's redistribute, tp_mlp and bench parts (reshard.torch under torchrun).
# Everything lands in $OUT/builtin_profile.tgz: machine.txt, build.txt, sweep_{builtin,calibrated}.{csv,log},
# python/ (status.txt and each part's log and JSON). auto's time against the fastest candidate per case:
#   python3 bench/results/2026-11-26-h100x2-session13/auto_vs_fastest.py sweep_builtin.csv sweep_calibrated.csv
set -uo pipefail
cd "$(dirname "$0")/../.."
source scripts/device/lib.sh
BUDGET=${BUDGET:-380}
trap archive_end EXIT  # the build log comes back too when the build fails
archive_begin builtin_profile || exit 1
sweep_mesh2 builtin
sweep_mesh2 calibrated bench/profiles/h100x2.json
PARTS="redistribute tp_mlp bench" BUDGET=$(( $(left) - 20 )) SKIP_BUILD=1 OUT=$OUT/python \
  bash python/gpu_tests/run_all.sh 2>&1 | tail -20

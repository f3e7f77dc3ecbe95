#!/usr/bin/env bash
# The ctest fixture python_install: a fresh virtual environment (with the system's site packages, for NumPy and
# pytest) and `pip install --no-build-isolation --no-index` of the source tree into it, which packages the extension
# modules of the build tree (RESHARD_CMAKE_BUILD_DIR) instead of building them again. The system's pip installs into
# the environment (`pip --python`), which saves installing pip there first.
# Usage: install_into_venv.sh PYTHON VENV SOURCE_DIR BUILD_DIR
set -euo pipefail
python=$1 venv=$2 source=$3 build=$4
rm -rf "$venv"
"$python" -m venv --system-site-packages --without-pip "$venv"
RESHARD_CMAKE_BUILD_DIR="$build" "$python" -m pip --python "$venv/bin/python" install --quiet \
  --disable-pip-version-check --no-build-isolation --no-index "$source"

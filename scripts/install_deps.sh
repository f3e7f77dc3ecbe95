#!/usr/bin/env bash
# Installs the Debian packages reshard builds with (only those missing). CUDA and NCCL are optional and come
# from the CUDA toolkit, not from here: without them reshard builds the planner and the host backend.
set -euo pipefail

# The build and tests: compilers, CMake, GoogleTest/benchmark, header libraries, {fmt}; pkgconf for the pkg-config
# consumer test. The Python package: python3-dev, pybind11-dev, libdlpack-dev; numpy and pytest for its tests; venv,
# pip, setuptools and wheel to install it as pip does (`pip install --no-build-isolation .`, offline).
# (ccache is optional: scripts/build.sh uses it when it is installed.)
packages=(cmake ninja-build g++ make pkgconf libgtest-dev libgmock-dev libbenchmark-dev nlohmann-json3-dev
          libcli11-dev libeigen3-dev libfmt-dev clang python3 python3-dev python3-numpy python3-pytest pybind11-dev
          libdlpack-dev python3-venv python3-pip python3-setuptools python3-wheel)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  sudo=""
  if [[ $(id -u) -ne 0 ]]; then sudo="sudo"; fi
  echo "installing: ${missing[*]}"
  $sudo apt-get update -q
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -q --no-install-recommends "${missing[@]}"
fi

# libFuzzer and the sanitizer runtimes for clang (the fuzz preset): libclang-rt-<major>-dev on Debian 12.
major=$(clang --version | sed -n 's/.*clang version \([0-9]*\).*/\1/p' | head -n 1)
if [[ -n "$major" ]] && ! dpkg-query -W -f='${Status}' "libclang-rt-${major}-dev" 2>/dev/null | grep -q "install ok installed"; then
  sudo=""
  if [[ $(id -u) -ne 0 ]]; then sudo="sudo"; fi
  echo "installing: libclang-rt-${major}-dev"
  $sudo apt-get update -q
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -q --no-install-recommends "libclang-rt-${major}-dev"
fi

#!/usr/bin/env bash
# The test command: installs missing packages, builds in build/ (Release) and runs every test with ctest.
# Exits non-zero on any failure. A second run reuses the build.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/deps.sh
rnn_dist_install_deps
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release ${RNN_DIST_CMAKE_ARGS:-}
cmake --build build -j"$(nproc)"
cd build
ctest --output-on-failure -j"$(nproc)"

#!/usr/bin/env bash
# The test command: installs missing packages, builds in build/ (Release) and runs every test with ctest.
# Exits non-zero on any failure. A second run reuses the build.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/deps.sh
rnn_dist_build
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
cd build
ctest --output-on-failure -j"$(nproc)"

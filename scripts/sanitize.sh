#!/usr/bin/env bash
# The sanitizer run (docs/testing.md): installs missing packages, builds every target with
# AddressSanitizer and UndefinedBehaviorSanitizer (-DRNN_DIST_SANITIZE=ON) in build-asan/ and runs every
# test with ctest: the unit tests with LeakSanitizer, then the CLI and MPI tests (tests/cli/) without it.
# Any sanitizer report fails its test. SANITIZE_EXCLUDE=REGEX leaves out more tests (e.g. slurm).
# Not part of scripts/test.sh: the build and the run take several times longer.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/deps.sh
rnn_dist_install_deps
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1

# Set before the build too: gtest_discover_tests runs every test program at build time.
# - ASan exits with 1 so a report is a failed test whatever the program's own exit codes mean.
# - Leaks: what libraries keep until exit is suppressed in the file, with reasons.
# - UBSan prints the stack and, as built (-fno-sanitize-recover=undefined), ends the program.
export ASAN_OPTIONS="check_initialization_order=1:strict_init_order=1:exitcode=1:${ASAN_OPTIONS:-}"
export LSAN_OPTIONS="suppressions=$PWD/scripts/sanitizer-leaks.supp:print_suppressions=0:${LSAN_OPTIONS:-}"
export UBSAN_OPTIONS="print_stacktrace=1:${UBSAN_OPTIONS:-}"

cmake -S . -B build-asan -DCMAKE_BUILD_TYPE=RelWithDebInfo -DRNN_DIST_SANITIZE=ON ${RNN_DIST_CMAKE_ARGS:-}
cmake --build build-asan -j"$(nproc)"
cd build-asan
extra=${SANITIZE_EXCLUDE:+|$SANITIZE_EXCLUDE}
status=0
ctest --output-on-failure -j"$(nproc)" -E "^cli\\.$extra" || status=1
# Open MPI leaks at MPI_Finalize from components it has already unloaded: LeakSanitizer reports those
# frames as "<unknown module>", which no suppression can name, so the MPI programs run without it.
ASAN_OPTIONS="detect_leaks=0:$ASAN_OPTIONS" ctest --output-on-failure -j"$(nproc)" -R '^cli\.' \
  ${SANITIZE_EXCLUDE:+-E "$SANITIZE_EXCLUDE"} || status=1
exit $status

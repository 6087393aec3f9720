# The shared frame of the CLI tests (sourced, not a test itself): $BUILD from the test's first argument,
# a temporary working directory $T (the test runs in it; removed at exit, after the test's own
# `cleanup` function when it defines one), mpirun allowed as root, ok/bad/finish to count results, and
# python_with to find a Python with given modules.
set -uo pipefail
BUILD=$(cd "$1" && pwd)
T=$(mktemp -d)
harness_exit() {
  declare -F cleanup > /dev/null && cleanup
  cd /
  rm -rf "$T"
}
trap harness_exit EXIT
cd "$T"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
pass=0 fail=0
ok() { echo "ok: $1"; pass=$((pass + 1)); }
bad() { echo "FAIL: $1"; fail=$((fail + 1)); }
# python_with MODULE...: sets PY to Debian's python3 (where apt installs python3-torch and the rest) or else
# the first python3 on the path, whichever imports every MODULE; otherwise says why and fails (the test
# then exits 77, skipped).
python_with() {
  local p
  for p in /usr/bin/python3 python3; do
    if command -v "$p" > /dev/null && "$p" -c "import $(IFS=,; echo "$*")" 2> /dev/null; then
      PY=$p
      return 0
    fi
  done
  echo "SKIP: no python3 here imports $* (scripts/deps.sh installs the Debian packages)"
  return 1
}
# The last line of every test: the counts, and the exit status.
finish() {
  echo "$pass passed, $fail failed"
  [ $fail -eq 0 ]
}

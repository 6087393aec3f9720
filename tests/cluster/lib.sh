# The frame of the cluster tests (sourced, not a test itself): $1 is the build directory. Skips the test
# (exit 77, which ctest reports as skipped) where this machine cannot make network namespaces; otherwise
# makes a cluster of $NODES nodes (cluster.sh) under /var/tmp, with its own copy of the programs and the
# job scripts (each node hides /tmp, where a checkout may be), and runs the test in $D/work, a directory
# every node sees. However the test ends, the cluster is removed and the test fails if anything of it is
# left. ok/bad/finish count the results as in tests/cli/lib/harness.sh.
set -uo pipefail
BUILD=$(cd "$1" && pwd)
REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
CLUSTER=$REPO/tests/cluster/cluster.sh
pass=0 fail=0
ok() { echo "ok (${SECONDS}s): $1"; pass=$((pass + 1)); }
bad() { echo "FAIL (${SECONDS}s): $1"; fail=$((fail + 1)); }
finish() {
  echo "$pass passed, $fail failed"
  [ $fail -eq 0 ]
}

if ! why=$(bash "$CLUSTER" can 2>&1); then
  echo "SKIP: the cluster tests need network namespaces: $why"
  exit 77
fi

D=$(mktemp -d /var/tmp/rnn_dist_cluster.XXXXXX)
cluster_teardown() {
  local rc=$?
  kill "${cluster_watchdog:-}" 2>/dev/null
  cd /
  if ! bash "$CLUSTER" down "$D"; then
    echo "FAIL: the cluster was not removed completely"
    rc=1
  fi
  rm -rf "$D"
  exit $rc
}
trap cluster_teardown EXIT
trap 'exit 1' INT TERM
# ctest ends a test past its TIMEOUT with SIGKILL, which no trap sees: a watchdog sends TERM first.
(trap 'kill $nap 2>/dev/null; exit 0' TERM; sleep $((${CLUSTER_TEST_TIMEOUT:-600} - 30)) & nap=$!; wait $nap && kill -TERM $$) \
  >/dev/null 2>&1 &
cluster_watchdog=$!

bash "$CLUSTER" up "$D" "${NODES:-2}" || { echo "FAIL: the cluster did not start"; exit 1; }
source "$D/env"
# The programs and job scripts as a checkout lays them out (RNN_DIST_HOME, RNN_DIST_BUILD).
HOME_DIR=$D/home
mkdir -p "$HOME_DIR/build" "$D/work"
cp "$BUILD/rnn_dist" "$BUILD/rnn_prep" "$HOME_DIR/build/"
cp -r "$REPO/jobs" "$HOME_DIR/"
BIN=$HOME_DIR/build
cd "$D/work"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
# Every node's ranks share this machine's cores: ranks waiting in MPI yield instead of spinning.
export OMPI_MCA_mpi_yield_when_idle=1

# on NODE CMD...: CMD on a node of the cluster, in the current directory.
on() { bash "$CLUSTER" exec "$D" "$@"; }
# mpi HOSTFILE NP ARGS...: mpirun from the login node over the nodes of HOSTFILE.
mpi() {
  local hosts=$1 np=$2
  shift 2
  on head timeout 300 "$D/mpirun" --hostfile "$hosts" -np "$np" "$@"
}
# hostfile FILE SLOTS...: a hostfile with SLOTS[k] slots on node k+1.
hostfile() {
  local file=$1 k=1
  shift
  : >"$file"
  for slots in "$@"; do
    echo "10.77.$TAG.$k slots=$slots" >>"$file"
    k=$((k + 1))
  done
}
# reachable NODE: waits (20 s at most) until head reaches NODE: a connection to a closed port is refused
# at once when the address answers.
reachable() {
  local addr=10.77.$TAG.${1#node}
  for _ in $(seq 40); do
    on head timeout 2 bash -c "exec 3<>/dev/tcp/$addr/9" 2>/dev/null
    [ $? -ne 124 ] && return 0
    sleep 0.5
  done
  return 1
}
# procs_left: the processes still running on any node (holders excepted), one per line.
procs_left() { for node in head $NODES; do bash "$CLUSTER" procs "$D" "$node" | sed "s/^/$node: /"; done; }

# The corpus of the CLI tests: 400 records of a 6-letter alphabet.
make_data() {
  awk 'BEGIN { srand(5); for (i = 0; i < 400; i++) { k = 5 + int(rand() * 40); line = ""
    for (j = 0; j < k; j++) line = line sprintf("%c", 97 + int(rand() * 6)); print line; print "%" } }' >corpus.txt
  "$BIN/rnn_prep" --input corpus.txt --output-dir data --format records --valid-fraction 0.05 >/dev/null
}

# max_rel_diff A.h5 B.h5: over every tensor of /model, the largest |a - b| relative to the tensor's
# largest |a| (a scale-aware relative difference: elements near zero do not blow it up).
values() { h5dump -y -w 0 -m %.9g -d "$2" -o /dev/fd/3 "$1" 3>&1 >/dev/null | tr -s ', \n' '\n' | grep .; }
max_rel_diff() {
  local a=$1 b=$2 name
  for name in $(h5ls -r "$a/model" | awk '$2 == "Dataset" { print $1 }'); do
    paste -d' ' <(values "$a" "/model$name") <(values "$b" "/model$name") |
      awk '{ x = $1 - $2; if (x < 0) x = -x; if (x > m) m = x; y = $1 < 0 ? -$1 : $1; if (y > s) s = y }
           END { print (s > 0 ? m / s : m) }'
  done | sort -g | tail -1
}

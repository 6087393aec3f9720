# The shared part of the rnn_dist job scripts, sourced by jobs/*.sbatch: where the programs are, how the
# ranks are launched (srun or mpirun), the pre-flight `rnn_dist check`, and the time-limit handling
# (TERM to the batch shell: every rank finishes its step and checkpoints, then the job requeues itself).
# Settings come from the environment (see jobs/README.md):
#   RNN_DIST_HOME         the rnn_dist checkout, or PREFIX/share/rnn_dist of an installation (default: the
#                         directory sbatch was run from)
#   RNN_DIST_BUILD        the directory holding rnn_dist and rnn_prep (default: $RNN_DIST_HOME/build, or
#                         else the directory of the rnn_dist on the PATH)
#   RNN_DIST_LAUNCHER     srun (default) or mpirun
#   RNN_DIST_SRUN_MPI     srun's --mpi plugin (default pmix; Debian's Open MPI has no PMI2 support)
#   RNN_DIST_CHECK        1 (default): run `rnn_dist check` before training and stop when it fails
#   RNN_DIST_REQUEUE_WITHIN  requeue after a TERM only when the job has at most this many seconds left
#                         (default 600: the time-limit signal requeues, a TERM sent by hand stops)
#   RNN_DIST_RESTARTS     how many times training that died of a signal (a crash, not an error exit or a
#                         stop) is started again, resuming from its latest checkpoint (default 0: a lost
#                         node also ends in a killed rank, and a restart would then wait for that node)

: "${RNN_DIST_HOME:=${SLURM_SUBMIT_DIR:-$PWD}}"
# A checkout's build/, or else where rnn_dist is installed (PREFIX/bin, with RNN_DIST_HOME=PREFIX/share/rnn_dist).
if [ -z "${RNN_DIST_BUILD:-}" ]; then
  RNN_DIST_BUILD=$RNN_DIST_HOME/build
  if [ ! -x "$RNN_DIST_BUILD/rnn_dist" ] && command -v rnn_dist > /dev/null; then
    RNN_DIST_BUILD=$(dirname "$(command -v rnn_dist)")
  fi
fi
: "${RNN_DIST_LAUNCHER:=srun}"
: "${RNN_DIST_SRUN_MPI:=pmix}"
: "${RNN_DIST_CHECK:=1}"
: "${RNN_DIST_REQUEUE_WITHIN:=600}"
: "${RNN_DIST_RESTARTS:=0}"

# Open MPI notices a node that stopped answering (a partition, a hung kernel) only through TCP keepalive
# on its daemons' connections: by default after about 8 minutes, and never once mpirun has data queued
# for that node, which it has as soon as a rank's own deadline (--comm-timeout) has ended it. Detection in
# time + intvl x probes = 20 s, below --comm-timeout (300 s by default; keep it so), lets mpirun end the
# whole job, on every node, before that.
export OMPI_MCA_oob_tcp_keepalive_time=${OMPI_MCA_oob_tcp_keepalive_time:-10}
export OMPI_MCA_oob_tcp_keepalive_intvl=${OMPI_MCA_oob_tcp_keepalive_intvl:-2}
export OMPI_MCA_oob_tcp_keepalive_probes=${OMPI_MCA_oob_tcp_keepalive_probes:-5}

rnn_dist_log() { echo "[$(date '+%F %T')] job ${SLURM_JOB_ID:-?}: $*"; }

# Sets RNN_DIST_LAUNCH to the command that starts a program on every task of the job.
rnn_dist_launcher() {
  case "$RNN_DIST_LAUNCHER" in
    # srun does not take --cpus-per-task from the job in Slurm 22.05+: pass it, or every rank gets one core.
    srun) RNN_DIST_LAUNCH=(srun --mpi="$RNN_DIST_SRUN_MPI" --cpus-per-task="${SLURM_CPUS_PER_TASK:-1}" --kill-on-bad-exit=1) ;;
    # Open MPI reads the allocation from Slurm; PE=c binds each rank to its c cores (the default binds
    # every rank to one core whatever --threads says).
    mpirun) RNN_DIST_LAUNCH=(mpirun -np "$SLURM_NTASKS" --map-by "slot:PE=${SLURM_CPUS_PER_TASK:-1}" --bind-to core) ;;
    *) echo "RNN_DIST_LAUNCHER=$RNN_DIST_LAUNCHER: unknown launcher (srun or mpirun)" >&2; return 2 ;;
  esac
}

# The config file named by the job's first argument; fails with one line when it is missing.
rnn_dist_config() {
  if [ -z "${1:-}" ] || [ ! -r "$1" ]; then
    echo "rnn_dist job: the first argument must be a readable config file (got '${1:-}')" >&2
    return 2
  fi
  echo "$1"
}

# CONFIG [check options]: the pre-flight check under the job's launcher (skipped when RNN_DIST_CHECK=0).
# A check that died of a signal, rather than failing a check (exit 1) or an argument (exit 2), runs once
# more: Open MPI 4.1.4 under srun's PMIx can crash in the first MPI_Init of a job, jumping to a NULL
# active-message callback of its TCP transport during the modex fence (docs/testing.md, issue 26 #7).
rnn_dist_preflight() {
  [ "$RNN_DIST_CHECK" = 1 ] || return 0
  rnn_dist_launcher
  local rc=0
  "${RNN_DIST_LAUNCH[@]}" "$RNN_DIST_BUILD/rnn_dist" check --config "$@" || rc=$?
  if [ "$rc" -gt 128 ]; then
    rnn_dist_log "pre-flight check died of signal $((rc - 128)); running it once more (Open MPI's MPI_Init crash, see docs/testing.md)"
    rc=0
    "${RNN_DIST_LAUNCH[@]}" "$RNN_DIST_BUILD/rnn_dist" check --config "$@" || rc=$?
  fi
  return "$rc"
}

# Seconds left before the job's time limit (a large number when there is none).
rnn_dist_time_left() {
  squeue -h -j "$SLURM_JOB_ID" -o %L 2>/dev/null | awk '
    /^[0-9]/ { d = 0; t = $1; if (index(t, "-")) { split(t, p, "-"); d = p[1]; t = p[2] }
               n = split(t, f, ":"); s = 0; for (i = 1; i <= n; i++) s = s * 60 + f[i]; print d * 86400 + s; ok = 1 }
    END { if (!ok) print 999999999 }'
}

# CONFIG [train options]: trains with --resume under the job's launcher. TERM or USR1 to the batch shell
# is passed on to the ranks as USR1 (mpirun forwards USR1; on TERM it would kill the ranks): they finish
# the current step, rank 0 writes a checkpoint, and they exit 0. Near the time limit the job then
# requeues itself (this function then ends the script) and the next run resumes from that checkpoint.
# Training that died of a signal (srun and mpirun exit with 128 + the signal) is started again, up to
# RNN_DIST_RESTARTS times, and resumes exactly from its latest checkpoint: this covers Open MPI's crash in
# MPI_Init (docs/testing.md) when it strikes the training step (RNN_DIST_CHECK=0), and other crashes that
# lose a rank. It is off by default: a partitioned node ends the step the same way (its peers' deadline,
# then srun kills the rest), and the restarted step would hang waiting for that node.
rnn_dist_train() {
  local config=$1 stop=0 rc=0 pid restarts=0
  shift
  trap 'stop=1; rnn_dist_log "signal: asking the ranks to checkpoint and stop"; kill -USR1 "$pid" 2>/dev/null' TERM USR1
  rnn_dist_launcher
  while :; do
    # Started directly in the background, so that $! is the launcher itself.
    "${RNN_DIST_LAUNCH[@]}" "$RNN_DIST_BUILD/rnn_dist" train --config "$config" --resume "$@" &
    pid=$!
    # wait returns early when a trapped signal arrives; wait again until the launcher itself has ended.
    while :; do
      rc=0
      wait "$pid" || rc=$?
      kill -0 "$pid" 2>/dev/null || break
    done
    [ "$stop" = 0 ] && [ "$rc" -gt 128 ] && [ "$restarts" -lt "$RNN_DIST_RESTARTS" ] || break
    restarts=$((restarts + 1))
    rnn_dist_log "training died of signal $((rc - 128)); restart $restarts of $RNN_DIST_RESTARTS, resuming from the latest checkpoint"
  done
  trap - TERM USR1
  if [ "$stop" = 1 ] && [ "$rc" = 0 ]; then
    local left
    left=$(rnn_dist_time_left)
    if [ "$left" -le "$RNN_DIST_REQUEUE_WITHIN" ]; then
      rnn_dist_log "checkpointed with ${left}s left: requeueing to resume"
      scontrol requeue "$SLURM_JOB_ID"
      exit 0  # the rest of the script runs after the requeued run has finished training
    else
      rnn_dist_log "checkpointed and stopped (${left}s left, not requeued)"
    fi
  fi
  return "$rc"
}

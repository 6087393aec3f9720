#!/usr/bin/env bash
# Hunts the rare "srun: error: node1: task 1: Segmentation fault" of cluster.slurm (issue 26 #7): on a
# 2-node Slurm cluster (tests/cluster/cluster.sh), runs RUNS times (default 50) either `srun --mpi=pmix
# -N2 -n4 rnn_dist train` of a short run (MODE srun) or, as cluster.slurm does, jobs/train_multinode.sbatch
# with --nodes=2 under sbatch --wait, its check and 1000 steps with checkpoints (MODE sbatch), with core
# dumps allowed, and keeps the whole output of every run that does not end with exit 0 (Open MPI prints
# the crashing process's backtrace there) under OUT (default ./srun-loop). Not a ctest test: a diagnosis to
# run by hand, as root: bash tests/cluster/srun_loop.sh build [RUNS] [OUT] [MODE]. Prints "N of RUNS runs
# failed". Found with it (under load: two busy loops beside it, MODE sbatch, run 12): a NULL call from
# mca_btl_tcp's active-message dispatch inside PMPI_Init_thread of `rnn_dist check`, a TCP fragment that
# reached a rank before its PML registered the tag: Open MPI 4.1.4's race under srun's PMIx fence.
# What the source of 4.1.4 says (ompi/runtime/ompi_mpi_init.c): with the default settings (none of
# pmix_base_async_modex, async_mpi_init set, here or in /etc/openmpi) ob1 registers its tags in add_procs
# and adds MPI_COMM_WORLD before MPI_Init's final fence, so a peer can only send early if that fence was
# skipped or released early: fence_release() ignores the fence's status, and Slurm's PMIx plugin releases
# a fence with an error on a timeout; or the fragment was not ob1's (a tag outside 0x41-0x49). The next
# crash tells them apart: the ompi_mpi_init frame's offset is the wait it was in (+0x6d4 the modex fence at
# line 713, +0x93e the final fence at 904), and OMPI_MCA_rte_base_verbose=1 prints each rank's waits.
# The next crash (2026-12-02, MODE sbatch with two busy loops, run 13; the core file in the cluster's
# work directory): rank 0 of `rnn_dist check` called address 0 from mca_btl_tcp's receive
# callback, called by opal_progress inside ompi_mpi_init + 0x6d4, the modex fence. The fragment arrived
# while the rank still waited in the modex fence, before add_procs, so it was not a race with the final
# fence. jobs/common.sh runs a pre-flight check that died of a signal once more, and, with
# RNN_DIST_RESTARTS=N, restarts training that died of one, resuming from its latest checkpoint.
NODES=2
OUT_DIR=$(mkdir -p "${3:-srun-loop}" && cd "${3:-srun-loop}" && pwd)
RUNS=${2:-50}
source "$(dirname "$0")/lib.sh"
bash "$CLUSTER" slurm "$D" > slurm.log 2>&1 || { bad "slurm did not start: $(cat slurm.log)"; exit 1; }
export SLURM_CONF=$D/slurm.conf
make_data || bad "rnn_prep"
ulimit -c unlimited
failed=0
export RNN_DIST_HOME=$HOME_DIR RNN_DIST_BUILD=$BIN
printf 'train = data/train.h5\nembed = 8\nhidden = 32\nlayers = 2\nbatch-size = 2\nepochs = 1000\nlog-every = 10\nseed = 5\ndevice = cpu\ncomm-timeout = 60\n' > job.conf
for k in $(seq "$RUNS"); do
  if [ "${4:-srun}" = sbatch ]; then
    rm -rf ck
    RNN_DIST_LAUNCHER=srun on head timeout 120 sbatch --wait --parsable -o run.out --nodes=2 --ntasks-per-node=2 \
      --cpus-per-task=1 --gpus-per-node=0 --time=10 "$HOME_DIR/jobs/train_multinode.sbatch" job.conf --max-steps 1000 \
      --save-every 20 --checkpoint-dir ck > /dev/null 2>&1
  else
    on head timeout 120 srun -N2 -n4 --mpi=pmix --kill-on-bad-exit=1 "$BIN/rnn_dist" train --train data/train.h5 \
      --embed 8 --hidden 32 --layers 2 --batch-size 2 --max-steps 40 --allreduce hierarchical --comm-timeout 60 \
      --device cpu > run.out 2>&1
  fi
  rc=$?
  if [ $rc -ne 0 ]; then
    failed=$((failed + 1))
    cp run.out "$OUT_DIR/run-$k.out"
    echo "run $k: exit $rc: $(grep -m1 -E 'Segmentation|signal|error' run.out)"
  fi
done
echo "$failed of $RUNS runs failed (outputs in $OUT_DIR)"
[ $failed -eq 0 ] && ok "no crash in $RUNS runs" || bad "$failed of $RUNS runs failed"
finish

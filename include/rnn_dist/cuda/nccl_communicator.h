// Collectives over GPU memory: a Communicator whose data pointers are device memory of a CUDA backend, and
// a Topology of such communicators, implemented with NCCL (src/cuda/nccl_communicator.cpp; in a build without the GPU path the
// factory throws, src/stub/nccl_unavailable.cpp). No CUDA header here: the CPU-only build includes it too.
#pragma once

#include <memory>

#include "rnn_dist/dist/communicator.h"
#include "rnn_dist/nn/backend.h"

namespace rnn_dist {

// How long a watchdog armed around NCCL waits beyond NCCL's own deadline, for NCCL's abort to return (it
// may block on a peer that hangs: NVIDIA/nccl#863).
constexpr double kNcclAbortMargin = 10;

// An NCCL communicator over the ranks of `bootstrap` (an MPI communicator, or the one-process stand-in),
// on `backend`'s GPU and stream. Collective over bootstrap: rank 0 creates the NCCL id and broadcasts it
// with bootstrap.broadcast(), then every rank joins with ncclCommInitRank.
//
// Every data pointer given to the result's collectives (allreduce_sum, allreduce_max, reduce_scatter_sum,
// allgather, broadcast) is device memory of `backend`; each call issues the collective on the backend's
// stream and returns, and complete() waits for all of them (one host synchronisation). barrier() and
// allgather_strings() go through `bootstrap`, which must outlive the result. With one rank the
// collectives go through NCCL too. Collectives that have not completed timeout_seconds after complete()
// began abort the NCCL communicator (ncclCommAbort) and throw Error naming the rank and host, instead of
// hanging; the time counts from complete(), so it also covers the device's work queued before the
// collectives (a training step's kernels: far less than --comm-timeout). With RNN_DIST_CUDA_SYNC=1 the
// launch after a collective waits for the whole device, and so for the collective without this deadline
// (the trainer's watchdog still ends a hang). Throws Error if `backend` is not a CUDA backend.
std::unique_ptr<Communicator> make_nccl_communicator(Communicator& bootstrap, Backend& backend,
                                                     double timeout_seconds = 300);

// The NCCL mirror of an MPI topology, for allreduce_sum() over device memory: the world communicator as
// above, and the node-level and cross-node communicators split from it with ncclCommSplit, with the same
// members and rank order as mpi.node and mpi.cross (which bootstrap their barrier() and
// allgather_strings(); `mpi` must outlive the result). Collective over mpi.world. Every rank takes part
// in both splits before their ranks are checked; when a step fails, what was created is aborted (not
// destroyed, which would wait for the peers) and the error thrown. The three share the backend's stream
// and so one wait: complete() on any of them waits for the collectives of all three, watching each one's
// errors, and a failure aborts all three. The set-up itself has no deadline: the trainer and `rnn_dist
// check` run it under their watchdog.
Topology make_nccl_topology(Topology& mpi, Backend& backend, double timeout_seconds = 300);

// How many times so far complete() found its collectives unfinished and polled again, in this process (0
// without the GPU path): the tests' proof that a wait went through the "not ready" answer.
int64_t nccl_not_ready_polls();

}  // namespace rnn_dist

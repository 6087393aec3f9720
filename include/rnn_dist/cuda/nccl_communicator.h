// Collectives over GPU memory: a Communicator whose data pointers are device memory of a CUDA backend, and
// a Topology of such communicators, implemented with NCCL (src/cuda/nccl_communicator.cpp; in a build without the GPU path the
// factory throws, src/stub/nccl_unavailable.cpp). No CUDA header here: the CPU-only build includes it too.
#pragma once

#include <memory>

#include "rnn_dist/dist/communicator.h"
#include "rnn_dist/nn/backend.h"

namespace rnn_dist {

// An NCCL communicator over the ranks of `bootstrap` (an MPI communicator, or the one-process stand-in),
// on `backend`'s GPU and stream. Collective over bootstrap: rank 0 creates the NCCL id and broadcasts it
// with bootstrap.broadcast(), then every rank joins with ncclCommInitRank.
//
// Every data pointer given to the result's collectives (allreduce_sum, allreduce_max, reduce_scatter_sum,
// allgather, broadcast) is device memory of `backend`; each call returns when the collective has completed
// on the device. barrier() and allgather_strings() go through `bootstrap`, which must outlive the result.
// With one rank the collectives do nothing. A collective that has not completed after timeout_seconds
// aborts the NCCL communicator (ncclCommAbort) and throws Error naming the rank and host, instead of hanging.
// Throws Error if `backend` is not a CUDA backend.
std::unique_ptr<Communicator> make_nccl_communicator(Communicator& bootstrap, Backend& backend,
                                                     double timeout_seconds = 300);

// The NCCL mirror of an MPI topology, for allreduce_sum() over device memory: the world communicator as
// above, and the node-level and cross-node communicators split from it with ncclCommSplit, with the same
// members and rank order as mpi.node and mpi.cross (which bootstrap their barrier() and
// allgather_strings(); `mpi` must outlive the result). Collective over mpi.world. Every rank takes part
// in both splits before their ranks are checked; when a step fails, what was created is aborted (not
// destroyed, which would wait for the peers) and the error thrown. The set-up itself has no deadline: the
// trainer runs it under its watchdog.
Topology make_nccl_topology(Topology& mpi, Backend& backend, double timeout_seconds = 300);

}  // namespace rnn_dist

// How an error on some ranks ends every rank, printed once: during set-up every rank reaches the same
// agreement point (agree_on_errors); during training an error on one rank ends the job with MPI_Abort
// (end_job), unless every rank raised it in lockstep after a collective (AgreedError).
#pragma once

#include <functional>

#include "rnn_dist/dist/communicator.h"
#include "rnn_dist/util/error.h"

namespace rnn_dist {

// An error every rank raises at the same point from the same all-reduced values (say, too many
// non-finite steps): rank 0 prints it and every rank exits normally with its code.
class AgreedError : public Error {
 public:
  using Error::Error;
};

// Runs fn on every rank; if it threw an Error on any, rank 0 prints the lowest failing rank's message
// once and every rank returns that error's exit code (0 when all succeeded). A collective: every rank
// must call it.
int agree_on_errors(Topology& topo, const std::function<void()>& fn);

// Reports an error raised on this rank alone and ends the job: with several ranks every rank is
// aborted (so none waits forever in a collective); the message names the rank. Returns the exit code
// for a single-rank run. AgreedError is printed by rank 0 only and never aborts.
int end_job(Topology& topo, const Error& e);

}  // namespace rnn_dist

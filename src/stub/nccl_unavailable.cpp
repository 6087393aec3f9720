// The NCCL communicators of a build without the GPU path: the factories exist so that callers link, and
// say why they cannot work.
#include "rnn_dist/cuda/nccl_communicator.h"
#include "rnn_dist/util/error.h"

namespace rnn_dist {

namespace {
[[noreturn]] void unavailable() {
  throw Error(
      "NCCL communicator: this build has no GPU path (reconfigure with -DRNN_DIST_CUDA=ON on a machine with CUDA, "
      "cuDNN >= 9 and NCCL >= 2.18)");
}
}  // namespace

std::unique_ptr<Communicator> make_nccl_communicator(Communicator&, Backend&, double) { unavailable(); }
Topology make_nccl_topology(Topology&, Backend&, double) { unavailable(); }
int64_t nccl_not_ready_polls() { return 0; }

}  // namespace rnn_dist

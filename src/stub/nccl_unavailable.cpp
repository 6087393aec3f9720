// The NCCL communicator of a build without the GPU path: the factory exists so that callers link, and
// says why it cannot work.
#include "rnn_dist/device_communicator.h"
#include "rnn_dist/error.h"

namespace rnn_dist {

std::unique_ptr<Communicator> make_nccl_communicator(Communicator&, Backend&, double) {
  throw Error(
      "NCCL communicator: this build has no GPU path (reconfigure with -DRNN_DIST_CUDA=ON on a machine with CUDA, "
      "cuDNN >= 9 and NCCL >= 2.18)");
}

}  // namespace rnn_dist

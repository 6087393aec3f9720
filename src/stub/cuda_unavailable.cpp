// The GPU entry points of a build without the GPU path (RNN_DIST_CUDA=OFF, or CUDA/cuDNN/NCCL not found).
#include "rnn_dist/cuda/cuda_device.h"
#include "rnn_dist/util/error.h"

namespace rnn_dist {

int cuda_device_count() { return 0; }

GpuInfo cuda_device_info(int) { throw Error("this build has no GPU path"); }

std::string gpu_runtime_versions() { return "none (built without CUDA)"; }

std::string cuda_pending_error() { return ""; }

std::unique_ptr<Backend> make_cuda_backend(int, MathMode) {
  throw InputError(
      "--device cuda: this build has no GPU path (reconfigure with -DRNN_DIST_CUDA=ON on a machine with CUDA, "
      "cuDNN >= 9 and NCCL >= 2.18)");
}

}  // namespace rnn_dist

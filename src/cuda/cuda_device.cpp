// GPU discovery for a build with the GPU path. The CUDA runtime reports no device (rather than failing)
// on a machine without a driver, so the same binary runs on CPU-only nodes.
#include <cuda_runtime.h>

#include "rnn_dist/backend.h"
#include "rnn_dist/error.h"

namespace rnn_dist {

int cuda_device_count() {
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess) {
    cudaGetLastError();  // clear the sticky "no driver" error
    return 0;
  }
  return n;
}

std::unique_ptr<Backend> make_cuda_backend(int) {
  throw InputError("--device cuda: the cuDNN training backend is not part of this version yet; use --device cpu");
}

}  // namespace rnn_dist

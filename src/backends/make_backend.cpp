// make_backend: picks the implementation of the requested device kind.
#include "rnn_dist/backends/make_backend.h"

#include "rnn_dist/cpu/cpu_backend.h"
#include "rnn_dist/cuda/cuda_device.h"
#include "rnn_dist/util/error.h"

namespace rnn_dist {

std::unique_ptr<Backend> make_backend(DeviceType type, int local_rank, int threads, MathMode math) {
  if (type == DeviceType::cuda) return make_cuda_backend(local_rank, math);
  if (math != MathMode::fp32)
    throw Error(cat("the CPU backend computes in fp32 only (", math_mode_name(math), " is a GPU math mode)"));
  return make_cpu_backend(threads);
}

}  // namespace rnn_dist

// make_backend: picks the implementation of the requested device kind.
#include "rnn_dist/backend.h"

#include "rnn_dist/error.h"

namespace rnn_dist {

std::unique_ptr<Backend> make_backend(DeviceType type, int local_rank, int threads, MathMode math) {
  if (type == DeviceType::cuda) return make_cuda_backend(local_rank, math);
  if (math != MathMode::fp32) throw Error("the CPU backend computes in fp32 only (TF32 is a GPU math mode)");
  return make_cpu_backend(threads);
}

}  // namespace rnn_dist

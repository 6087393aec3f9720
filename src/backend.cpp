// make_backend: picks the implementation of the requested device kind.
#include "rnn_dist/backend.h"

namespace rnn_dist {

std::unique_ptr<Backend> make_backend(DeviceType type, int local_rank, int threads) {
  if (type == DeviceType::cpu) return make_cpu_backend(threads);
  return make_cuda_backend(local_rank);
}

}  // namespace rnn_dist

// The CPU backend: the BLAS reference kernels of cpu_kernels.h behind the Backend interface.
#pragma once

#include <memory>

#include "rnn_dist/nn/backend.h"

namespace rnn_dist {

// threads sets the thread count of the kernels' team (each member calls single-threaded BLAS).
std::unique_ptr<Backend> make_cpu_backend(int threads);

}  // namespace rnn_dist

// The backends of this build, behind one factory: make_backend picks the CPU or the CUDA backend for a rank.
#pragma once

#include <memory>

#include "rnn_dist/nn/backend.h"

namespace rnn_dist {

// The backend of this rank: device "cpu", or "cuda" bound to GPU local_rank (fails clearly when the
// build has no GPU path or the rank has no GPU). threads sets the CPU thread count (BLAS and kernels);
// math applies to "cuda" (asking the CPU for another than fp32 throws Error).
std::unique_ptr<Backend> make_backend(DeviceType type, int local_rank, int threads, MathMode math = MathMode::fp32);

}  // namespace rnn_dist

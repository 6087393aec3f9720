// The GPU path's entry points: GPU discovery, versions and the CUDA backend. Implemented by src/cuda/ in a
// build with the GPU path, otherwise by src/stub/ (which then explains that the build has no GPU path).
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "rnn_dist/nn/backend.h"

namespace rnn_dist {

// The backend on GPU local_rank, computing in `math` (fails clearly when the build has no GPU path or the
// rank has no GPU).
std::unique_ptr<Backend> make_cuda_backend(int local_rank, MathMode math);

// Number of usable GPUs (0 in a build without the GPU path or without a driver).
int cuda_device_count();

// A visible GPU as `rnn_dist check` reports it. cuda_device_info() throws Error in a build without the GPU path.
struct GpuInfo {
  std::string name, pci_bus_id;
  int64_t memory_bytes = 0;
};
GpuInfo cuda_device_info(int index);
// "CUDA runtime 12.4, driver 12.4, cuDNN 9.1.0, NCCL 2.21.5", or "none (built without CUDA)".
std::string gpu_runtime_versions();

// The error the CUDA runtime holds for this thread, left as it is (cudaPeekAtLastError): "" when there is
// none (and without the GPU path). cuDNN, cuBLAS and NCCL read that slot too, so nothing of ours may leave
// an answer there; the tests check it.
std::string cuda_pending_error();

}  // namespace rnn_dist

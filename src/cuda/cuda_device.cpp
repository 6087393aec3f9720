// GPU discovery for a build with the GPU path. The CUDA runtime reports no device (rather than failing)
// on a machine without a driver, so the same binary runs on CPU-only nodes.
#include "rnn_dist/cuda/cuda_device.h"

#include <cuda_runtime.h>
#include <cudnn.h>
#include <nccl.h>

#include <cstdlib>

#include "cuda_backend.h"
#include "cuda_check.h"
#include "rnn_dist/util/error.h"

namespace rnn_dist {

int cuda_device_count() {
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess) {
    cudaGetLastError();  // clear the sticky "no driver" error
    return 0;
  }
  return n;
}

GpuInfo cuda_device_info(int index) {
  cudaDeviceProp prop{};
  if (cudaGetDeviceProperties(&prop, index) != cudaSuccess) {
    cudaGetLastError();
    throw Error(cat("GPU ", index, ": cannot read its properties"));
  }
  char bus[32] = {0};
  if (cudaDeviceGetPCIBusId(bus, sizeof(bus), index) != cudaSuccess) cudaGetLastError();
  return {prop.name, bus, static_cast<int64_t>(prop.totalGlobalMem)};
}

std::string cuda_pending_error() {
  const cudaError_t e = cudaPeekAtLastError();
  return e == cudaSuccess ? "" : cudaGetErrorString(e);
}

std::string gpu_runtime_versions() {
  int runtime = 0, driver = 0, nccl = 0;
  cudaRuntimeGetVersion(&runtime);
  cudaDriverGetVersion(&driver);  // 0 without a driver
  ncclGetVersion(&nccl);
  const size_t cudnn = cudnnGetVersion();
  auto cuda = [](int v) { return cat(v / 1000, ".", v % 1000 / 10); };
  return cat("CUDA runtime ", cuda(runtime), ", driver ", driver ? cuda(driver) : "none", ", cuDNN ", cudnn / 10000, ".",
             cudnn % 10000 / 100, ".", cudnn % 100, ", NCCL ", nccl / 10000, ".", nccl % 10000 / 100, ".", nccl % 100);
}

std::unique_ptr<Backend> make_cuda_backend(int local_rank, MathMode math) {
  const int visible = cuda_device_count();
  if (local_rank < 0 || local_rank >= visible) {
    const char* devices = std::getenv("CUDA_VISIBLE_DEVICES");
    throw InputError(cat("--device cuda: host ", cuda::host_name(), ": local rank ", local_rank, " has no GPU (",
                         visible, " visible, CUDA_VISIBLE_DEVICES=", devices ? devices : "(unset)",
                         "); start at most ", visible, " ranks per node, one per GPU"));
  }
  return cuda::create_backend(local_rank, math);
}

}  // namespace rnn_dist

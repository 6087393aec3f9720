// Error checking for the CUDA runtime, cuBLAS, cuDNN and NCCL in host code (.cpp only). The throwing
// macros turn a failed call into rnn_dist::Error naming the expression, file:line, rank and host; the
// *_WARN variants print the same to stderr and carry on, for destructors and clean-up paths.
#pragma once

#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <cudnn.h>
#include <nccl.h>

#include <string>

namespace rnn_dist::cuda {

// "rank 3 on host gpu17": the rank from the launcher's environment (OMPI_COMM_WORLD_RANK, PMIX_RANK,
// PMI_RANK, SLURM_PROCID; "rank ?" when none is set), so that it works before and without MPI.
std::string where();
std::string host_name();

// Throws Error("<library> error: <message> in `<expr>` at <file>:<line> (<where>)").
[[noreturn]] void fail(const char* library, const char* message, const char* expr, const char* file, int line);
// Prints the same line to stderr.
void warn(const char* library, const char* message, const char* expr, const char* file, int line) noexcept;

// A kernel fails while it runs, after its launch returned: the error would surface at some later call,
// far from its cause. In debug builds (without NDEBUG) and with RNN_DIST_CUDA_SYNC=1, CUDA_LAUNCH_CHECK
// waits for the device after each launch, so the error names the launch that caused it.
bool sync_after_launch();
void check_launch(cudaError_t launched, const char* expr, const char* file, int line);
// A launch's status is read from the thread's last-error slot, which may still hold an answer left by an
// earlier call that was not an error of ours: cudaEventQuery's cudaErrorNotReady, above all. Cleared before
// each launch, so that a launch reports its own failure only. An error that really broke the context is
// sticky: the launch after it fails with it again.
void discard_stale_error() noexcept;

}  // namespace rnn_dist::cuda

#define RNN_DIST_GPU_CHECK_(report, library, ok, message_of, expr)                       \
  do {                                                                                   \
    const auto rnn_dist_status_ = (expr);                                                \
    if (rnn_dist_status_ != (ok))                                                        \
      ::rnn_dist::cuda::report(library, message_of(rnn_dist_status_), #expr, __FILE__, __LINE__); \
  } while (0)

#define CUDA_CHECK(expr) RNN_DIST_GPU_CHECK_(fail, "CUDA", cudaSuccess, cudaGetErrorString, expr)
#define CUBLAS_CHECK(expr) RNN_DIST_GPU_CHECK_(fail, "cuBLAS", CUBLAS_STATUS_SUCCESS, cublasGetStatusString, expr)
#define CUDNN_CHECK(expr) RNN_DIST_GPU_CHECK_(fail, "cuDNN", CUDNN_STATUS_SUCCESS, cudnnGetErrorString, expr)
#define NCCL_CHECK(expr) RNN_DIST_GPU_CHECK_(fail, "NCCL", ncclSuccess, ncclGetErrorString, expr)

// For the launch_* functions of kernels.h, which return the launch's status (cudaGetLastError()).
#define CUDA_LAUNCH_CHECK(expr) \
  ::rnn_dist::cuda::check_launch((::rnn_dist::cuda::discard_stale_error(), (expr)), #expr, __FILE__, __LINE__)

#define CUDA_WARN(expr) RNN_DIST_GPU_CHECK_(warn, "CUDA", cudaSuccess, cudaGetErrorString, expr)
#define CUBLAS_WARN(expr) RNN_DIST_GPU_CHECK_(warn, "cuBLAS", CUBLAS_STATUS_SUCCESS, cublasGetStatusString, expr)
#define CUDNN_WARN(expr) RNN_DIST_GPU_CHECK_(warn, "cuDNN", CUDNN_STATUS_SUCCESS, cudnnGetErrorString, expr)
#define NCCL_WARN(expr) RNN_DIST_GPU_CHECK_(warn, "NCCL", ncclSuccess, ncclGetErrorString, expr)

// Internal interface between the pieces of the GPU path (host code only): the device context a CUDA
// backend owns (device, stream, cuBLAS and cuDNN handles), which its cuDNN LSTM and the NCCL communicator
// enqueue their work on, and the factories behind make_cuda_backend().
#pragma once

#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <cudnn.h>

#include <memory>

#include "rnn_dist/nn/backend.h"

namespace rnn_dist::cuda {

// How many times the host has waited until the stream ran dry: each wait bumps `count`, so a value read
// back after a wait that began later than its copy is already there (Backend::finish_read), and the
// pinned staging area is free again.
struct HostSyncs {
  int64_t count = 0;
};

// Everything of one backend runs on one stream, so that work is ordered without events.
struct Context {
  int device = 0;
  cudaStream_t stream = nullptr;
  cublasHandle_t cublas = nullptr;
  cudnnHandle_t cudnn = nullptr;
  MathMode math = MathMode::fp32;  // of cuBLAS (set on the handle) and of cuDNN's LSTM (its descriptor)
  HostSyncs* syncs = nullptr;      // the backend's, counted by whoever waits for the stream
};

// The backend on GPU local_rank (make_cuda_backend checks first that the GPU exists).
std::unique_ptr<Backend> create_backend(int local_rank, MathMode math);

// The context of a backend made by create_backend(); nullptr for any other backend.
const Context* context_of(const Backend& backend);

// The cuDNN LSTM over `backend`'s memory and context.
std::unique_ptr<Lstm> make_cudnn_lstm(Backend& backend, const Context& context, const LstmShape& shape);

}  // namespace rnn_dist::cuda

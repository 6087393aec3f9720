// Launchers of the CUDA backend's own kernels (kernels.cu). Plain functions over raw device pointers and
// sizes, C++17 and free of our C++20 headers so that both nvcc and the host code include it. Each enqueues
// on `stream` and returns the launch status (cudaGetLastError(), so a stale error must be cleared before the
// call, as CUDA_LAUNCH_CHECK does); shapes follow cpu/cpu_kernels.h, row-major.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

namespace rnn_dist::cuda {

// Blocks of the first stage of the two-stage reductions: `partial` buffers hold this many doubles.
constexpr int kReduceBlocks = 256;

// A target outside the vocabulary, as the loss kernel records it: the row in the high 32 bits and the
// target's bits in the low ones, so that atomicMin keeps the first bad row with its target. No bad target
// leaves the word at kNoBadTarget, which the caller sets.
constexpr unsigned long long kNoBadTarget = ~0ull;
__host__ __device__ inline unsigned long long bad_target_code(int64_t row, int32_t target) {
  return (static_cast<unsigned long long>(row) << 32) | static_cast<uint32_t>(target);
}

cudaError_t launch_fill(float* x, int64_t n, float value, cudaStream_t stream);
// y[r, :] = b for every row: the bias the output-layer GEMM then adds onto.
cudaError_t launch_broadcast_rows(const float* b, int64_t rows, int cols, float* y, cudaStream_t stream);
cudaError_t launch_scale(float* x, int64_t n, float a, cudaStream_t stream);

// bfloat16 values, held as their 16-bit patterns (this header stays free of cuda_bf16.h): y = x rounded to
// nearest even; y = x exactly; y += x.
cudaError_t launch_to_bf16(const float* x, int64_t n, uint16_t* y, cudaStream_t stream);
cudaError_t launch_from_bf16(const uint16_t* x, int64_t n, float* y, cudaStream_t stream);
cudaError_t launch_add_from_bf16(float* y, const uint16_t* x, int64_t n, cudaStream_t stream);

cudaError_t launch_embedding_forward(const int32_t* ids, int64_t rows, const float* table, int dim, float* out,
                                     cudaStream_t stream);
// dtable[ids[r]] += dout[r] with atomic adds (repeated ids accumulate in no fixed order).
cudaError_t launch_embedding_backward(const int32_t* ids, int64_t rows, const float* dout, int dim, float* dtable,
                                      cudaStream_t stream);
// Backend::embedding_backward_rows: each compact row summed by its own threads in the CPU's order.
cudaError_t launch_embedding_backward_rows(const int32_t* order, const int32_t* starts, const int32_t* slots, int64_t k,
                                           int64_t fresh_from, const float* dout, int dim, float* rows,
                                           cudaStream_t stream);

// Fused log-softmax + NLL (+ gradient when dlogits is not null; it may alias logits), one block per row.
// row_loss: rows doubles of scratch; partial: kReduceBlocks doubles; *loss_sum += the rows' total, and
// *bad_target keeps the smallest bad_target_code of a row whose target lies outside the vocabulary.
cudaError_t launch_cross_entropy(const float* logits, int64_t rows, int vocab, const int32_t* targets,
                                 float* dlogits, float grad_scale, double* row_loss, double* partial,
                                 double* loss_sum, unsigned long long* bad_target, cudaStream_t stream);

// y[i] = uniform01(seed, i) < p ? 0 : x[i] * keep_scale, the CPU backend's mask bit for bit.
cudaError_t launch_dropout(const float* x, int64_t n, float p, float keep_scale, uint64_t seed, float* y,
                           cudaStream_t stream);

// *out = sum of x[i]^2 in double, in a fixed order (deterministic). partial: kReduceBlocks doubles.
cudaError_t launch_sum_squares(const float* x, int64_t n, double* partial, double* out, cudaStream_t stream);

// Pooling over a packed batch (cpu_kernels.h pool_forward/backward; pool 0 last, 1 mean, 2 max): lengths
// (batch int32) and step_offset (steps + 1 int64) in device memory describe the packing.
cudaError_t launch_pool_forward(const float* y, const int32_t* lengths, const int64_t* step_offset, int batch,
                                int dim, int directions, int pool, float* out, int32_t* argmax, cudaStream_t stream);
// dy must be zero on entry (the rows nothing is pooled from stay zero).
cudaError_t launch_pool_backward(const float* dout, const int32_t* lengths, const int64_t* step_offset, int batch,
                                 int dim, int directions, int pool, const int32_t* argmax, float* dy,
                                 cudaStream_t stream);

// The updates of optimizer.h with the CPU backend's operation order (no contraction into FMA), so that
// both backends give the same floats.
cudaError_t launch_sgd_update(float* p, const float* g, float* velocity, int64_t n, float lr, float momentum,
                              float weight_decay, cudaStream_t stream);
cudaError_t launch_adam_update(float* p, const float* g, float* m, float* v, int64_t n, float lr, float beta1,
                               float beta2, float eps, float weight_decay, bool decoupled, float step_size,
                               float inv_sqrt_bc2, cudaStream_t stream);
// The same on k rows of a table (Backend::sgd_update_rows, adam_update_rows).
cudaError_t launch_sgd_update_rows(float* p, const float* g, float* velocity, const int32_t* ids, int64_t k, int dim,
                                   float lr, float momentum, float weight_decay, cudaStream_t stream);
cudaError_t launch_adam_update_rows(float* p, const float* g, float* m, float* v, const int32_t* ids, int64_t k,
                                    int dim, float lr, float beta1, float beta2, float eps, float weight_decay,
                                    bool decoupled, float step_size, float inv_sqrt_bc2, cudaStream_t stream);

}  // namespace rnn_dist::cuda

// The CUDA backend's own kernels (launchers in kernels.h): elementwise ops, embedding, the fused
// cross-entropy, the counter-based dropout mask shared with the CPU backend, deterministic reductions and
// the optimizer updates. Compiled as C++17 by nvcc.
#include "kernels.h"

#include <cuda_bf16.h>

#include <algorithm>

namespace rnn_dist::cuda {
namespace {

constexpr int kThreads = 256;

// Grid for a grid-stride loop over n items: enough blocks to fill the GPU, never more than needed.
unsigned grid_for(int64_t n) {
  const int64_t blocks = (n + kThreads - 1) / kThreads;
  return static_cast<unsigned>(std::max<int64_t>(1, std::min<int64_t>(blocks, 65536)));
}

__device__ int64_t first_index() { return int64_t{blockIdx.x} * blockDim.x + threadIdx.x; }
__device__ int64_t grid_stride() { return int64_t{gridDim.x} * blockDim.x; }

// The same function as src/random.h's splitmix64/uniform01, so masks match the CPU's exactly.
__device__ uint64_t splitmix64(uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}
__device__ float uniform01(uint64_t seed, uint64_t i) {
  return __fmul_rn(static_cast<float>(splitmix64(seed ^ splitmix64(i)) >> 40), 1.0f / 16777216.0f);
}

// Sum over the block in a fixed order (warp shuffles, then warp 0 over the warps' sums); every thread
// gets the result. `shared` holds 32 doubles.
__device__ double block_sum(double v, double* shared) {
  for (int o = 16; o > 0; o /= 2) v += __shfl_down_sync(0xffffffffu, v, o);
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  __syncthreads();  // shared may still be read by a previous call
  if (lane == 0) shared[warp] = v;
  __syncthreads();
  const int warps = (blockDim.x + 31) / 32;
  v = threadIdx.x < warps ? shared[threadIdx.x] : 0.0;
  if (warp == 0)
    for (int o = 16; o > 0; o /= 2) v += __shfl_down_sync(0xffffffffu, v, o);
  if (threadIdx.x == 0) shared[0] = v;
  __syncthreads();
  return shared[0];
}

__device__ float block_max(float v, float* shared) {
  for (int o = 16; o > 0; o /= 2) v = fmaxf(v, __shfl_down_sync(0xffffffffu, v, o));
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  __syncthreads();
  if (lane == 0) shared[warp] = v;
  __syncthreads();
  const int warps = (blockDim.x + 31) / 32;
  v = threadIdx.x < warps ? shared[threadIdx.x] : -INFINITY;
  if (warp == 0)
    for (int o = 16; o > 0; o /= 2) v = fmaxf(v, __shfl_down_sync(0xffffffffu, v, o));
  if (threadIdx.x == 0) shared[0] = v;
  __syncthreads();
  return shared[0];
}

__global__ void fill_kernel(float* x, int64_t n, float value) {
  for (int64_t i = first_index(); i < n; i += grid_stride()) x[i] = value;
}

__global__ void broadcast_rows_kernel(const float* b, int64_t rows, int cols, float* y) {
  const int64_t n = rows * cols;
  for (int64_t i = first_index(); i < n; i += grid_stride()) y[i] = b[i % cols];
}

__global__ void scale_kernel(float* x, int64_t n, float a) {
  for (int64_t i = first_index(); i < n; i += grid_stride()) x[i] *= a;
}

__global__ void to_bf16_kernel(const float* x, int64_t n, __nv_bfloat16* y) {
  for (int64_t i = first_index(); i < n; i += grid_stride()) y[i] = __float2bfloat16_rn(x[i]);
}

__global__ void from_bf16_kernel(const __nv_bfloat16* x, int64_t n, float* y) {
  for (int64_t i = first_index(); i < n; i += grid_stride()) y[i] = __bfloat162float(x[i]);
}

__global__ void add_from_bf16_kernel(float* y, const __nv_bfloat16* x, int64_t n) {
  for (int64_t i = first_index(); i < n; i += grid_stride()) y[i] += __bfloat162float(x[i]);
}

__global__ void embedding_forward_kernel(const int32_t* ids, int64_t rows, const float* table, int dim, float* out) {
  const int64_t n = rows * dim;
  for (int64_t i = first_index(); i < n; i += grid_stride()) {
    const int64_t r = i / dim, j = i % dim;
    out[i] = table[int64_t{ids[r]} * dim + j];
  }
}

__global__ void embedding_backward_kernel(const int32_t* ids, int64_t rows, const float* dout, int dim,
                                          float* dtable) {
  const int64_t n = rows * dim;
  for (int64_t i = first_index(); i < n; i += grid_stride()) {
    const int64_t r = i / dim, j = i % dim;
    atomicAdd(dtable + int64_t{ids[r]} * dim + j, dout[i]);
  }
}

// One block per row: max, sum of exponentials (float exponentials, double sum, as the CPU), the row's
// NLL into row_loss, and the gradient. The target's logit is read before any write, so dlogits may alias
// logits.
__global__ void cross_entropy_kernel(const float* logits, int64_t rows, int vocab, const int32_t* targets,
                                     float* dlogits, float grad_scale, double* row_loss,
                                     unsigned long long* bad_target) {
  __shared__ double dshared[32];
  __shared__ float fshared[32];
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const float* l = logits + r * vocab;
    const int32_t target = targets[r];
    if (target < 0 || target >= vocab) {
      if (threadIdx.x == 0) {
        atomicMin(bad_target, bad_target_code(r, target));
        row_loss[r] = 0;
      }
      continue;  // uniform across the block: every thread reads the same target
    }
    float mx = -INFINITY;
    for (int k = threadIdx.x; k < vocab; k += blockDim.x) mx = fmaxf(mx, l[k]);
    mx = block_max(mx, fshared);
    double s = 0;
    for (int k = threadIdx.x; k < vocab; k += blockDim.x) s += static_cast<double>(expf(l[k] - mx));
    const double sum = block_sum(s, dshared);  // ends with a barrier: every read of l[target] below is safe
    const float lt = l[target];
    if (threadIdx.x == 0) row_loss[r] = static_cast<double>(mx) + log(sum) - static_cast<double>(lt);
    if (dlogits != nullptr) {
      __syncthreads();  // every thread has read lt before any writes
      float* d = dlogits + r * vocab;
      const float coef = static_cast<float>(static_cast<double>(grad_scale) / sum);
      for (int k = threadIdx.x; k < vocab; k += blockDim.x) {
        const float e = expf(l[k] - mx) * coef;
        d[k] = k == target ? e - grad_scale : e;
      }
    }
    __syncthreads();  // shared scratch and the next row
  }
}

__global__ void dropout_kernel(const float* x, int64_t n, float p, float keep_scale, uint64_t seed, float* y) {
  for (int64_t i = first_index(); i < n; i += grid_stride())
    y[i] = uniform01(seed, static_cast<uint64_t>(i)) < p ? 0.0f : __fmul_rn(x[i], keep_scale);
}

// First stage: block b sums its grid-stride share into partial[b]; the second stage adds the partials in
// order. Fixed grid and block sizes make the result independent of timing.
template <bool kSquare, class T>
__global__ void reduce_stage1(const T* x, int64_t n, double* partial) {
  __shared__ double shared[32];
  double s = 0;
  for (int64_t i = first_index(); i < n; i += grid_stride()) {
    const double v = static_cast<double>(x[i]);
    s += kSquare ? v * v : v;
  }
  s = block_sum(s, shared);
  if (threadIdx.x == 0) partial[blockIdx.x] = s;
}

// *out = the sum of the partials, or *out += it (the loss blocks of one batch).
template <bool kAdd>
__global__ void reduce_stage2(const double* partial, int n, double* out) {
  __shared__ double shared[32];
  double s = 0;
  for (int i = threadIdx.x; i < n; i += blockDim.x) s += partial[i];
  s = block_sum(s, shared);
  if (threadIdx.x == 0) *out = kAdd ? *out + s : s;
}

// Operation for operation as CpuBackend::sgd_update/adam_update; the _rn intrinsics keep nvcc from
// fusing multiply-adds, which the CPU does not do. Element e of p (and the state) with g[from]: the flat
// updates have e = from, the rows of a table e = ids[j] * dim + column.
__device__ void sgd_element(float* p, const float* g, float* velocity, int64_t e, int64_t from, float lr,
                            float momentum, float weight_decay) {
  float d = __fadd_rn(g[from], __fmul_rn(weight_decay, p[e]));
  if (momentum != 0) {
    velocity[e] = __fadd_rn(__fmul_rn(momentum, velocity[e]), d);
    d = velocity[e];
  }
  p[e] = __fsub_rn(p[e], __fmul_rn(lr, d));
}

__device__ void adam_element(float* p, const float* g, float* m, float* v, int64_t e, int64_t from, float lr,
                             float beta1, float beta2, float eps, float weight_decay, bool decoupled, float step_size,
                             float inv_sqrt_bc2) {
  float grad = g[from];
  if (decoupled)
    p[e] = __fsub_rn(p[e], __fmul_rn(__fmul_rn(lr, weight_decay), p[e]));
  else
    grad = __fadd_rn(grad, __fmul_rn(weight_decay, p[e]));
  m[e] = __fadd_rn(__fmul_rn(beta1, m[e]), __fmul_rn(__fsub_rn(1.0f, beta1), grad));
  v[e] = __fadd_rn(__fmul_rn(beta2, v[e]), __fmul_rn(__fmul_rn(__fsub_rn(1.0f, beta2), grad), grad));
  const float denom = __fadd_rn(__fmul_rn(__fsqrt_rn(v[e]), inv_sqrt_bc2), eps);
  p[e] = __fsub_rn(p[e], __fdiv_rn(__fmul_rn(step_size, m[e]), denom));
}

__global__ void sgd_kernel(float* p, const float* g, float* velocity, int64_t n, float lr, float momentum,
                           float weight_decay) {
  for (int64_t i = first_index(); i < n; i += grid_stride()) sgd_element(p, g, velocity, i, i, lr, momentum, weight_decay);
}

__global__ void adam_kernel(float* p, const float* g, float* m, float* v, int64_t n, float lr, float beta1,
                            float beta2, float eps, float weight_decay, bool decoupled, float step_size,
                            float inv_sqrt_bc2) {
  for (int64_t i = first_index(); i < n; i += grid_stride())
    adam_element(p, g, m, v, i, i, lr, beta1, beta2, eps, weight_decay, decoupled, step_size, inv_sqrt_bc2);
}

__device__ int64_t table_element(const int32_t* ids, int64_t i, int dim) { return int64_t{ids[i / dim]} * dim + i % dim; }

__global__ void sgd_rows_kernel(float* p, const float* g, float* velocity, const int32_t* ids, int64_t n, int dim,
                                float lr, float momentum, float weight_decay) {
  for (int64_t i = first_index(); i < n; i += grid_stride())
    sgd_element(p, g, velocity, table_element(ids, i, dim), i, lr, momentum, weight_decay);
}

__global__ void adam_rows_kernel(float* p, const float* g, float* m, float* v, const int32_t* ids, int64_t n, int dim,
                                 float lr, float beta1, float beta2, float eps, float weight_decay, bool decoupled,
                                 float step_size, float inv_sqrt_bc2) {
  for (int64_t i = first_index(); i < n; i += grid_stride())
    adam_element(p, g, m, v, table_element(ids, i, dim), i, lr, beta1, beta2, eps, weight_decay, decoupled, step_size,
                 inv_sqrt_bc2);
}

// One thread per (compact row, column): the row's sum in the order the CPU adds it, without atomics.
__global__ void embedding_backward_rows_kernel(const int32_t* order, const int32_t* starts, const int32_t* slots,
                                               int64_t k, int64_t fresh_from, const float* dout, int dim,
                                               float* rows) {
  const int64_t n = k * dim;
  for (int64_t i = first_index(); i < n; i += grid_stride()) {
    const int64_t j = i / dim, c = i % dim;
    float* dst = rows + int64_t{slots[j]} * dim + c;
    float acc = slots[j] >= fresh_from ? 0.0f : *dst;
    for (int32_t r = starts[j]; r < starts[j + 1]; ++r) acc = __fadd_rn(acc, dout[int64_t{order[r]} * dim + c]);
    *dst = acc;
  }
}

}  // namespace

cudaError_t launch_fill(float* x, int64_t n, float value, cudaStream_t stream) {
  if (n > 0) fill_kernel<<<grid_for(n), kThreads, 0, stream>>>(x, n, value);
  return cudaGetLastError();
}

cudaError_t launch_broadcast_rows(const float* b, int64_t rows, int cols, float* y, cudaStream_t stream) {
  if (rows * cols > 0) broadcast_rows_kernel<<<grid_for(rows * cols), kThreads, 0, stream>>>(b, rows, cols, y);
  return cudaGetLastError();
}

cudaError_t launch_scale(float* x, int64_t n, float a, cudaStream_t stream) {
  if (n > 0) scale_kernel<<<grid_for(n), kThreads, 0, stream>>>(x, n, a);
  return cudaGetLastError();
}

// __nv_bfloat16 is a 16-bit struct over the same bits, so the patterns are reinterpreted, not converted.
cudaError_t launch_to_bf16(const float* x, int64_t n, uint16_t* y, cudaStream_t stream) {
  if (n > 0) to_bf16_kernel<<<grid_for(n), kThreads, 0, stream>>>(x, n, reinterpret_cast<__nv_bfloat16*>(y));
  return cudaGetLastError();
}

cudaError_t launch_from_bf16(const uint16_t* x, int64_t n, float* y, cudaStream_t stream) {
  if (n > 0) from_bf16_kernel<<<grid_for(n), kThreads, 0, stream>>>(reinterpret_cast<const __nv_bfloat16*>(x), n, y);
  return cudaGetLastError();
}

cudaError_t launch_add_from_bf16(float* y, const uint16_t* x, int64_t n, cudaStream_t stream) {
  if (n > 0) add_from_bf16_kernel<<<grid_for(n), kThreads, 0, stream>>>(y, reinterpret_cast<const __nv_bfloat16*>(x), n);
  return cudaGetLastError();
}

cudaError_t launch_embedding_forward(const int32_t* ids, int64_t rows, const float* table, int dim, float* out,
                                     cudaStream_t stream) {
  if (rows * dim > 0)
    embedding_forward_kernel<<<grid_for(rows * dim), kThreads, 0, stream>>>(ids, rows, table, dim, out);
  return cudaGetLastError();
}

cudaError_t launch_embedding_backward(const int32_t* ids, int64_t rows, const float* dout, int dim, float* dtable,
                                      cudaStream_t stream) {
  if (rows * dim > 0)
    embedding_backward_kernel<<<grid_for(rows * dim), kThreads, 0, stream>>>(ids, rows, dout, dim, dtable);
  return cudaGetLastError();
}

cudaError_t launch_embedding_backward_rows(const int32_t* order, const int32_t* starts, const int32_t* slots, int64_t k,
                                           int64_t fresh_from, const float* dout, int dim, float* rows,
                                           cudaStream_t stream) {
  if (k * dim > 0)
    embedding_backward_rows_kernel<<<grid_for(k * dim), kThreads, 0, stream>>>(order, starts, slots, k, fresh_from,
                                                                                 dout, dim, rows);
  return cudaGetLastError();
}

cudaError_t launch_cross_entropy(const float* logits, int64_t rows, int vocab, const int32_t* targets,
                                 float* dlogits, float grad_scale, double* row_loss, double* partial,
                                 double* loss_sum, unsigned long long* bad_target, cudaStream_t stream) {
  if (rows > 0) {
    const unsigned grid = static_cast<unsigned>(std::min<int64_t>(rows, 1 << 20));
    cross_entropy_kernel<<<grid, kThreads, 0, stream>>>(logits, rows, vocab, targets, dlogits, grad_scale, row_loss,
                                                       bad_target);
    reduce_stage1<false, double><<<kReduceBlocks, kThreads, 0, stream>>>(row_loss, rows, partial);
    reduce_stage2<true><<<1, kThreads, 0, stream>>>(partial, kReduceBlocks, loss_sum);
  }
  return cudaGetLastError();
}

cudaError_t launch_dropout(const float* x, int64_t n, float p, float keep_scale, uint64_t seed, float* y,
                           cudaStream_t stream) {
  if (n > 0) dropout_kernel<<<grid_for(n), kThreads, 0, stream>>>(x, n, p, keep_scale, seed, y);
  return cudaGetLastError();
}

cudaError_t launch_sum_squares(const float* x, int64_t n, double* partial, double* out, cudaStream_t stream) {
  reduce_stage1<true, float><<<kReduceBlocks, kThreads, 0, stream>>>(x, n, partial);
  reduce_stage2<false><<<1, kThreads, 0, stream>>>(partial, kReduceBlocks, out);
  return cudaGetLastError();
}

cudaError_t launch_sgd_update(float* p, const float* g, float* velocity, int64_t n, float lr, float momentum,
                              float weight_decay, cudaStream_t stream) {
  if (n > 0) sgd_kernel<<<grid_for(n), kThreads, 0, stream>>>(p, g, velocity, n, lr, momentum, weight_decay);
  return cudaGetLastError();
}

cudaError_t launch_adam_update(float* p, const float* g, float* m, float* v, int64_t n, float lr, float beta1,
                               float beta2, float eps, float weight_decay, bool decoupled, float step_size,
                               float inv_sqrt_bc2, cudaStream_t stream) {
  if (n > 0)
    adam_kernel<<<grid_for(n), kThreads, 0, stream>>>(p, g, m, v, n, lr, beta1, beta2, eps, weight_decay, decoupled,
                                                       step_size, inv_sqrt_bc2);
  return cudaGetLastError();
}

cudaError_t launch_sgd_update_rows(float* p, const float* g, float* velocity, const int32_t* ids, int64_t k, int dim,
                                   float lr, float momentum, float weight_decay, cudaStream_t stream) {
  if (k * dim > 0)
    sgd_rows_kernel<<<grid_for(k * dim), kThreads, 0, stream>>>(p, g, velocity, ids, k * dim, dim, lr, momentum,
                                                                  weight_decay);
  return cudaGetLastError();
}

cudaError_t launch_adam_update_rows(float* p, const float* g, float* m, float* v, const int32_t* ids, int64_t k,
                                    int dim, float lr, float beta1, float beta2, float eps, float weight_decay,
                                    bool decoupled, float step_size, float inv_sqrt_bc2, cudaStream_t stream) {
  if (k * dim > 0)
    adam_rows_kernel<<<grid_for(k * dim), kThreads, 0, stream>>>(p, g, m, v, ids, k * dim, dim, lr, beta1, beta2, eps,
                                                                   weight_decay, decoupled, step_size, inv_sqrt_bc2);
  return cudaGetLastError();
}

namespace {

__device__ int64_t packed_row(const int64_t* step_offset, int t, int b) { return step_offset[t] + b; }

// One thread per (sequence, column).
__global__ void pool_forward_kernel(const float* y, const int32_t* lengths, const int64_t* step_offset, int batch,
                                    int dim, int half, int pool, float* out, int32_t* argmax) {
  for (int64_t i = first_index(); i < int64_t{batch} * dim; i += grid_stride()) {
    const int b = static_cast<int>(i / dim), k = static_cast<int>(i % dim), L = lengths[b];
    if (pool == 0) {
      out[i] = y[packed_row(step_offset, k < half ? L - 1 : 0, b) * dim + k];
    } else if (pool == 1) {
      float s = 0;
      for (int t = 0; t < L; ++t) s += y[packed_row(step_offset, t, b) * dim + k];
      out[i] = s / static_cast<float>(L);
    } else {
      int best = 0;
      for (int t = 1; t < L; ++t)
        if (y[packed_row(step_offset, t, b) * dim + k] > y[packed_row(step_offset, best, b) * dim + k]) best = t;
      out[i] = y[packed_row(step_offset, best, b) * dim + k];
      argmax[i] = best;
    }
  }
}

__global__ void pool_backward_kernel(const float* dout, const int32_t* lengths, const int64_t* step_offset, int batch,
                                     int dim, int half, int pool, const int32_t* argmax, float* dy) {
  for (int64_t i = first_index(); i < int64_t{batch} * dim; i += grid_stride()) {
    const int b = static_cast<int>(i / dim), k = static_cast<int>(i % dim), L = lengths[b];
    if (pool == 0)
      dy[packed_row(step_offset, k < half ? L - 1 : 0, b) * dim + k] = dout[i];
    else if (pool == 1)
      for (int t = 0; t < L; ++t) dy[packed_row(step_offset, t, b) * dim + k] = dout[i] / static_cast<float>(L);
    else
      dy[packed_row(step_offset, argmax[i], b) * dim + k] = dout[i];
  }
}

}  // namespace

cudaError_t launch_pool_forward(const float* y, const int32_t* lengths, const int64_t* step_offset, int batch,
                                int dim, int directions, int pool, float* out, int32_t* argmax, cudaStream_t stream) {
  const int64_t n = int64_t{batch} * dim;
  if (n > 0)
    pool_forward_kernel<<<grid_for(n), kThreads, 0, stream>>>(y, lengths, step_offset, batch, dim, dim / directions,
                                                              pool, out, argmax);
  return cudaGetLastError();
}

cudaError_t launch_pool_backward(const float* dout, const int32_t* lengths, const int64_t* step_offset, int batch,
                                 int dim, int directions, int pool, const int32_t* argmax, float* dy,
                                 cudaStream_t stream) {
  const int64_t n = int64_t{batch} * dim;
  if (n > 0)
    pool_backward_kernel<<<grid_for(n), kThreads, 0, stream>>>(dout, lengths, step_offset, batch, dim, dim / directions,
                                                               pool, argmax, dy);
  return cudaGetLastError();
}

}  // namespace rnn_dist::cuda

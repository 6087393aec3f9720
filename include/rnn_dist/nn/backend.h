// The Backend interface: everything that touches a rank's device goes through it (allocation, copies and
// the model's kernels), so calling code never names a device API. One implementation per device kind
// (CPU: BLAS reference kernels, src/cpu/; CUDA: cuDNN/cuBLAS, src/cuda/), chosen at run time by make_backend()
// (backends/make_backend.h).
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "rnn_dist/nn/packing.h"
#include "rnn_dist/nn/tensor.h"
#include "rnn_dist/util/bfloat16.h"

namespace rnn_dist {

// A named parameter inside a flat parameter buffer, in PyTorch's layout and naming.
struct ParamSlice {
  std::string name;
  int64_t offset = 0;  // elements from the start of the region that holds it
  std::vector<int64_t> shape;
};

// Told during a backward pass which gradients are final, so that their all-reduce can start while the
// pass goes on: final_from(offset) means every gradient from `offset` to the end of the buffer is final.
// A backward pass finishes the output layer first and the embedding last, and the flat layout puts them
// in the opposite order, so gradients become final from the end of the buffer towards its start.
// Offsets are relative to the buffer the callee was given; they never increase during one pass. On an
// asynchronous device "final" means that the kernels computing them have been issued on the backend's stream.
class GradientReady {
 public:
  virtual void final_from(int64_t offset) = 0;

 protected:
  ~GradientReady() = default;
};

struct LstmShape {
  int input = 0, hidden = 0, layers = 1;
  float dropout = 0;           // between layers, training only
  bool bidirectional = false;  // a reverse direction per layer, as PyTorch's nn.LSTM(bidirectional=True)
  int proj = 0;                // > 0: h is projected to this width, as nn.LSTM(proj_size=proj)
  int out() const { return proj > 0 ? proj : hidden; }  // the width of h and of each direction's outputs
};

// A multi-layer LSTM over packed batches on one backend. The weights are one contiguous region of
// weight_elems() floats whose layout belongs to the implementation; canonical_params() locates each
// PyTorch-named matrix and bias inside it (weight_ih_l0, ..., weight_hr_l0 with a projection,
// weight_ih_l0_reverse, ...). With D directions (2 when bidirectional) and R = shape.out() (the projection's
// width, else hidden), y is rows x (D * R), the forward direction's outputs first in each row, and layer
// l > 0 reads both directions of layer l - 1; states h0/hn are (layers * D) x batch x R and c0/cn
// (layers * D) x batch x hidden, index l * D + d, as PyTorch's h_n and c_n. Each sequence's reverse
// direction starts at its own last token.
class Lstm {
 public:
  virtual ~Lstm() = default;
  virtual int64_t weight_elems() const = 0;
  virtual std::vector<ParamSlice> canonical_params() const = 0;
  // y: rows x hidden (top layer). h0/c0 may be null (zeros), hn/cn may be null. With training=true the
  // activations needed by backward() are kept until the next forward().
  virtual void forward(const float* weights, const Packing& packing, const float* x, const float* h0, const float* c0,
                       float* y, float* hn, float* cn, bool training, uint64_t dropout_seed) = 0;
  // Gradients of the last training forward(): dweights accumulates; dx, dh0, dc0 are overwritten (null = skip).
  // `ready` (may be null) hears of weight gradients as they become final (offsets into dweights): per
  // layer where the implementation computes them per layer, else once at the end.
  virtual void backward(const float* weights, const float* dy, const float* dhn, const float* dcn, float* dx,
                        float* dh0, float* dc0, float* dweights, GradientReady* ready = nullptr) = 0;
  // Allocates every workspace forward() (and with training, backward()) needs for batches of this
  // packing's rows and sequences, computing nothing: forward() starts with it, and a MemoryPlan runs it on
  // a backend that only counts (train/memory_plan.h).
  virtual void reserve(const Packing& packing, bool training) = 0;
};

class Backend {
 public:
  virtual ~Backend() = default;
  virtual Device device() const = 0;
  virtual std::string device_name() const = 0;  // human-readable, for placement lines

  // Bytes held by Buffers of this backend now, and at most so far (counted by Buffer, from any thread): the
  // trainer reports the peak, which a MemoryPlan predicts.
  int64_t bytes_in_use() const { return in_use_.load(); }
  int64_t peak_bytes() const { return peak_.load(); }
  void count_bytes(int64_t delta) {
    const int64_t now = in_use_.fetch_add(delta) + delta;
    for (int64_t p = peak_.load(); now > p && !peak_.compare_exchange_weak(p, now);) {
    }
  }

  // Memory. On the CPU backend allocate, deallocate, upload, download, copy and the bf16 conversions may
  // also be called from a communication thread while the owning thread runs kernels (GradientReducer, whose
  // overlap runs on host memory only); everything else, and everything of a GPU backend, belongs to one thread.
  virtual void* allocate(size_t bytes) = 0;
  virtual void deallocate(void* p) noexcept = 0;
  virtual void upload(void* device_dst, const void* host_src, size_t bytes) = 0;
  virtual void download(void* host_dst, const void* device_src, size_t bytes) = 0;
  virtual void copy(void* dst, const void* src, size_t bytes) = 0;  // device to device
  virtual void zero(float* x, int64_t n) = 0;
  // dst = src rounded to bfloat16 (nearest, ties to even), and back: gradients under --allreduce-dtype bf16.
  virtual void to_bf16(Bf16* dst, const float* src, int64_t n) = 0;
  virtual void from_bf16(float* dst, const Bf16* src, int64_t n) = 0;
  // Waits until every operation issued so far has finished (a no-op where calls are synchronous): for
  // timing asynchronous devices.
  virtual void synchronize() = 0;
  // A few doubles of device memory read back without a synchronisation of their own, so that a training
  // step waits for the device once: start_read() issues the copy of device[0, n), n <= kMaxRead, after the
  // work issued so far; finish_read() stores them in host[0, n), waiting for the device only when it has
  // not been waited for since start_read() (a synchronisation, or a collective completed on the backend's
  // stream, Communicator::complete()). It also throws what the device found meanwhile (a target outside
  // the vocabulary, see cross_entropy). One read at a time. On the CPU both are copies.
  static constexpr int kMaxRead = 8;
  virtual void start_read(const double* device, int n) = 0;
  virtual void finish_read(double* host) = 0;
  // How many times so far the host has waited for this backend's device (0 where calls are synchronous):
  // the training step's count is in the metrics summary.
  virtual int64_t host_syncs() const = 0;
  // How many logits (rows x vocabulary) the model computes at once: the output layer and the loss run in
  // blocks of about this size. The CPU's block fits its caches; a GPU's is limited only by the memory
  // worth spending on it.
  virtual int64_t logits_block_elems() const = 0;

  // Model kernels (shapes as in cpu/cpu_kernels.h; a null bias b or db: a linear layer without one).
  virtual void embedding_forward(const int32_t* ids, int64_t rows, const float* table, int dim, float* out) = 0;
  virtual void embedding_backward(const int32_t* ids, int64_t rows, const float* dout, int dim, float* dtable) = 0;
  // The same sums into the compact rows of a row-sparse gradient (cpu_kernels.h; order, starts and slots
  // in this backend's memory), each row in the CPU's order: bitwise the rows the CPU's embedding_backward
  // adds into a dense table.
  virtual void embedding_backward_rows(const int32_t* order, const int32_t* starts, const int32_t* slots, int64_t k,
                                       int64_t fresh_from, const float* dout, int dim, float* rows) = 0;
  virtual void linear_forward(const float* x, int64_t rows, int in, const float* w, const float* b, int out,
                              float* y) = 0;
  virtual void linear_backward(const float* x, int64_t rows, int in, const float* w, int out, const float* dy,
                               float* dx, float* dw, float* db) = 0;
  // Adds the sum of the rows' negative log-likelihoods to *loss_sum, one double in this backend's memory
  // (the blocks of a batch add up on the device, read back once); dlogits (may alias logits) = (softmax -
  // onehot) * grad_scale. A target outside the vocabulary throws Error naming it and its row within its
  // call: at once on the CPU; on an asynchronous device at the next finish_read(), which names the
  // smallest such row of the calls since the read before.
  virtual void cross_entropy(const float* logits, int64_t rows, int vocab, const int32_t* targets, float* dlogits,
                             float grad_scale, double* loss_sum) = 0;
  // y = x * mask, mask[i] = 0 with probability p else 1/(1-p), a pure function of (seed, i): the backward
  // pass calls it with the same seed on the gradient.
  virtual void dropout(const float* x, int64_t n, float p, uint64_t seed, float* y) = 0;
  // A classifier's pooling over a packed batch (cpu/cpu_kernels.h): y rows x dim to out batch x dim;
  // argmax, batch x dim int32 in this backend's memory, is written by Pool::max and read by its backward;
  // pool_backward overwrites dy (rows x dim).
  virtual void pool_forward(const float* y, const Packing& packing, int dim, int directions, Pool pool, float* out,
                            int32_t* argmax) = 0;
  virtual void pool_backward(const float* dout, const Packing& packing, int dim, int directions, Pool pool,
                             const int32_t* argmax, float* dy) = 0;
  // Sum of x[i]^2 in double: into *out (one double in this backend's memory, read back with start_read),
  // or returned, which waits for the device.
  virtual void sum_squares(const float* x, int64_t n, double* out) = 0;
  virtual double sum_squares(const float* x, int64_t n) = 0;
  virtual void scale(float* x, int64_t n, float a) = 0;
  // Optimizer updates over flat buffers (see optimizer.h for the formulas).
  virtual void sgd_update(float* p, const float* g, float* velocity, int64_t n, float lr, float momentum,
                          float weight_decay) = 0;
  virtual void adam_update(float* p, const float* g, float* m, float* v, int64_t n, float lr, float beta1,
                           float beta2, float eps, float weight_decay, bool decoupled, int64_t step) = 0;
  // The same updates on k rows of a table (dim wide): row ids[j] (this backend's memory) of p and of the
  // state with row j of g, element for element the formulas of the flat updates; other rows are untouched.
  virtual void sgd_update_rows(float* p, const float* g, float* velocity, const int32_t* ids, int64_t k, int dim,
                               float lr, float momentum, float weight_decay) = 0;
  virtual void adam_update_rows(float* p, const float* g, float* m, float* v, const int32_t* ids, int64_t k, int dim,
                                float lr, float beta1, float beta2, float eps, float weight_decay, bool decoupled,
                                int64_t step) = 0;

  // An LSTM of this backend's kind whose weights and workspaces are allocated from `memory` (this backend,
  // or a MemoryPlan's counting one).
  virtual std::unique_ptr<Lstm> create_lstm(const LstmShape& shape, Backend& memory) = 0;
  std::unique_ptr<Lstm> make_lstm(const LstmShape& shape) { return create_lstm(shape, *this); }

 private:
  std::atomic<int64_t> in_use_{0}, peak_{0};
};

// How a GPU computes the matrix products of cuBLAS and cuDNN's LSTM (`--precision`). fp32: plain fp32,
// equal to the CPU backend up to rounding. tf32: TF32 tensor cores (inputs rounded to a 10-bit mantissa,
// fp32 accumulation), about 1e-3 relative. bf16: bfloat16 tensor cores with fp32 accumulation, the LSTM
// on cuDNN's bf16 data (cuDNN >= 9.13), about 1e-2 relative. Parameters, gradients and optimizer state
// stay fp32 in every mode. The CPU backend is always fp32.
enum class MathMode { fp32, tf32, bf16 };
// "fp32", "tf32" or "bf16", as --precision takes them (InputError naming --precision otherwise).
MathMode math_mode_from(const std::string& precision);
const char* math_mode_name(MathMode math);

}  // namespace rnn_dist

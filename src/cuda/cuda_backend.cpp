// The CUDA backend: one GPU per rank, bound with cudaSetDevice(local_rank) before anything is allocated;
// memory from the device's stream-ordered pool (cudaMallocAsync: a caching allocator, so steady-state steps
// do not call the driver), every kernel, copy, cuBLAS and cuDNN call on the backend's one stream; the
// output layer through cuBLAS, the rest through kernels.cu; create_lstm() gives the cuDNN LSTM.
#include "cuda_backend.h"

#include <algorithm>
#include <climits>
#include <cmath>
#include <cstdint>
#include <cstring>

#include "cuda_check.h"
#include "kernels.h"
#include "rnn_dist/nn/optimizer.h"
#include "rnn_dist/util/error.h"

namespace rnn_dist::cuda {
namespace {

// RAII owners of the backend's handles, each destroyed with a warning (not an exception) on failure.
struct StreamOwner {
  cudaStream_t s = nullptr;
  ~StreamOwner() {
    if (s) CUDA_WARN(cudaStreamDestroy(s));
  }
};
struct CublasOwner {
  cublasHandle_t h = nullptr;
  ~CublasOwner() {
    if (h) CUBLAS_WARN(cublasDestroy(h));
  }
};
struct CudnnOwner {
  cudnnHandle_t h = nullptr;
  ~CudnnOwner() {
    if (h) CUDNN_WARN(cudnnDestroy(h));
  }
};
struct PinnedOwner {
  void* p = nullptr;
  size_t bytes = 0;
  ~PinnedOwner() {
    if (p) CUDA_WARN(cudaFreeHost(p));
  }
};

// Uploads up to this size go through the pinned staging area (the batch's ids, targets and lengths);
// larger ones (parameters from a checkpoint) are copied synchronously from the caller's memory.
constexpr size_t kStagingMax = size_t{64} << 20;
constexpr size_t kPinnedBytes = (Backend::kMaxRead + 1) * sizeof(double);
constexpr size_t kStagingAlign = 256;

int checked_int(int64_t v, const char* what) {
  if (v < 0 || v > INT_MAX) throw Error(cat("CUDA backend: ", what, " = ", v, " does not fit cuBLAS's int"));
  return static_cast<int>(v);
}

class CudaBackend final : public Backend {
 public:
  CudaBackend(int local_rank, MathMode math) {
    ctx_.device = local_rank;
    ctx_.math = math;
    ctx_.syncs = &syncs_;
    // Binds this thread to its GPU before anything is created on a device (else it would land on GPU 0).
    CUDA_CHECK(cudaSetDevice(local_rank));
    cudaDeviceProp prop{};
    CUDA_CHECK(cudaGetDeviceProperties(&prop, local_rank));
    char bus[32] = {0};
    CUDA_CHECK(cudaDeviceGetPCIBusId(bus, sizeof(bus), local_rank));
    name_ = cat("cuda:", local_rank, " (", prop.name, ", PCI ", bus, ")");

    // The default pool keeps freed memory for reuse instead of returning it at each synchronisation.
    CUDA_CHECK(cudaDeviceGetDefaultMemPool(&pool_, local_rank));
    uint64_t keep = UINT64_MAX;
    CUDA_CHECK(cudaMemPoolSetAttribute(pool_, cudaMemPoolAttrReleaseThreshold, &keep));

    CUDA_CHECK(cudaStreamCreateWithFlags(&stream_.s, cudaStreamNonBlocking));
    ctx_.stream = stream_.s;
    CUBLAS_CHECK(cublasCreate(&cublas_.h));
    CUBLAS_CHECK(cublasSetStream(cublas_.h, stream_.s));
    // The GEMMs' precision is their compute type (gemm() below); the handle's math mode stays the default,
    // which uses no tensor cores for CUBLAS_COMPUTE_32F.
    CUBLAS_CHECK(cublasSetMathMode(cublas_.h, CUBLAS_DEFAULT_MATH));
    compute_ = math == MathMode::tf32   ? CUBLAS_COMPUTE_32F_FAST_TF32
               : math == MathMode::bf16 ? CUBLAS_COMPUTE_32F_FAST_16BF
                                        : CUBLAS_COMPUTE_32F;
    ctx_.cublas = cublas_.h;
    CUDNN_CHECK(cudnnCreate(&cudnn_.h));
    CUDNN_CHECK(cudnnSetStream(cudnn_.h, stream_.s));
    ctx_.cudnn = cudnn_.h;

    CUDA_CHECK(cudaMallocHost(&pinned_.p, kPinnedBytes));
    scratch_ = Buffer(*this, kReduceBlocks * sizeof(double) + 2 * sizeof(double));
    CUDA_CHECK(cudaMemsetAsync(bad_target(), 0xff, sizeof(unsigned long long), stream_.s));
  }

  ~CudaBackend() override {
    // Buffers this backend still owns go back to the pool before the stream and handles are destroyed.
    ones_ = Buffer();
    row_loss_ = Buffer();
    packing_ = Buffer();
    scratch_ = Buffer();
    if (stream_.s) CUDA_WARN(cudaStreamSynchronize(stream_.s));
  }

  const Context& context() const { return ctx_; }

  Device device() const override { return Device{DeviceType::cuda, ctx_.device}; }
  std::string device_name() const override { return name_; }

  void* allocate(size_t bytes) override {
    void* p = nullptr;
    cudaError_t e = cudaMallocAsync(&p, bytes, stream_.s);
    if (e == cudaErrorMemoryAllocation) {
      cudaGetLastError();
      // Cached blocks may be fragmented: hand them back to the driver and try once more.
      sync_stream();
      CUDA_CHECK(cudaMemPoolTrimTo(pool_, 0));
      e = cudaMallocAsync(&p, bytes, stream_.s);
    }
    if (e != cudaSuccess) {
      cudaGetLastError();
      size_t free_bytes = 0, total = 0;
      cudaMemGetInfo(&free_bytes, &total);
      throw Error(cat("out of GPU memory allocating ", bytes, " bytes on ", name_, " (", free_bytes >> 20, " MiB free of ",
                      total >> 20, " MiB; ", cudaGetErrorString(e), "; ", where(), ")"));
    }
    return p;
  }
  void deallocate(void* p) noexcept override { CUDA_WARN(cudaFreeAsync(p, stream_.s)); }

  // The caller may reuse src as soon as this returns, yet the host does not wait for the device: src is
  // copied into the free part of a pinned staging area and the device copies from there, asynchronously
  // (from pageable memory, cudaMemcpyAsync would wait). Each wait for the stream frees the whole area.
  void upload(void* dst, const void* src, size_t bytes) override {
    if (bytes == 0) return;
    if (staged_at_ != syncs_.count) staged_ = 0, staged_at_ = syncs_.count;
    if (bytes > kStagingMax) {
      CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyHostToDevice, stream_.s));
      sync_stream();
      return;
    }
    if (staged_ + bytes > staging_.bytes) {
      sync_stream();  // every staged copy has completed: the whole area is free
      staged_ = 0, staged_at_ = syncs_.count;
      if (bytes > staging_.bytes) {
        CUDA_CHECK(cudaFreeHost(staging_.p));
        staging_.p = nullptr;
        const size_t grown = std::min(kStagingMax, std::max({bytes, 2 * staging_.bytes, size_t{1} << 20}));
        CUDA_CHECK(cudaMallocHost(&staging_.p, grown));
        staging_.bytes = grown;
      }
    }
    char* stage = static_cast<char*>(staging_.p) + staged_;
    std::memcpy(stage, src, bytes);
    CUDA_CHECK(cudaMemcpyAsync(dst, stage, bytes, cudaMemcpyHostToDevice, stream_.s));
    staged_ += (bytes + kStagingAlign - 1) / kStagingAlign * kStagingAlign;
  }
  void download(void* dst, const void* src, size_t bytes) override {
    if (bytes == 0) return;
    CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToHost, stream_.s));
    sync_stream();
  }
  void copy(void* dst, const void* src, size_t bytes) override {
    if (bytes == 0 || dst == src) return;
    CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, stream_.s));
  }
  void zero(float* x, int64_t n) override {
    if (n > 0) CUDA_CHECK(cudaMemsetAsync(x, 0, static_cast<size_t>(n) * sizeof(float), stream_.s));
  }
  void to_bf16(Bf16* dst, const float* src, int64_t n) override {
    CUDA_LAUNCH_CHECK(launch_to_bf16(src, n, reinterpret_cast<uint16_t*>(dst), stream_.s));
  }
  void from_bf16(float* dst, const Bf16* src, int64_t n) override {
    CUDA_LAUNCH_CHECK(launch_from_bf16(reinterpret_cast<const uint16_t*>(src), n, dst, stream_.s));
  }
  void synchronize() override { sync_stream(); }

  // pinned_ holds [kMaxRead doubles read | the bad-target word], copied in one go; the device's bad-target
  // word is reset behind the copy, so each read reports what was found since the last one.
  void start_read(const double* device, int n) override {
    if (n < 0 || n > kMaxRead) throw Error(cat("start_read of ", n, " doubles (at most ", kMaxRead, ")"));
    if (reading_) throw Error("start_read while the last read is unfinished (one read at a time)");
    auto* host = static_cast<double*>(pinned_.p);
    if (n > 0) CUDA_CHECK(cudaMemcpyAsync(host, device, n * sizeof(double), cudaMemcpyDeviceToHost, stream_.s));
    CUDA_CHECK(cudaMemcpyAsync(host + kMaxRead, bad_target(), sizeof(unsigned long long), cudaMemcpyDeviceToHost,
                               stream_.s));
    CUDA_CHECK(cudaMemsetAsync(bad_target(), 0xff, sizeof(unsigned long long), stream_.s));
    read_n_ = n;
    read_at_ = syncs_.count;
    reading_ = true;
  }
  void finish_read(double* host) override {
    if (!reading_) throw Error("finish_read without start_read");
    reading_ = false;
    if (read_at_ == syncs_.count) sync_stream();  // no wait since the copy was issued
    const auto* pinned = static_cast<const double*>(pinned_.p);
    unsigned long long bad = 0;
    std::memcpy(&bad, pinned + kMaxRead, sizeof(bad));
    if (bad != kNoBadTarget)
      throw Error(cat("cross_entropy: target ", static_cast<int32_t>(static_cast<uint32_t>(bad)), " of row ", bad >> 32,
                      " is outside the vocabulary of ", vocab_));
    std::copy_n(pinned, read_n_, host);
  }
  int64_t host_syncs() const override { return syncs_.count; }
  // 256 MB: a word-level batch (128 x 110 rows, V = 10,000) in 3 blocks, not 34.
  int64_t logits_block_elems() const override { return int64_t{1} << 26; }

  void embedding_forward(const int32_t* ids, int64_t rows, const float* table, int dim, float* out) override {
    CUDA_LAUNCH_CHECK(launch_embedding_forward(ids, rows, table, dim, out, stream_.s));
  }
  void embedding_backward(const int32_t* ids, int64_t rows, const float* dout, int dim, float* dtable) override {
    CUDA_LAUNCH_CHECK(launch_embedding_backward(ids, rows, dout, dim, dtable, stream_.s));
  }
  void embedding_backward_rows(const int32_t* order, const int32_t* starts, const int32_t* slots, int64_t k,
                               int64_t fresh_from, const float* dout, int dim, float* rows) override {
    CUDA_LAUNCH_CHECK(
        launch_embedding_backward_rows(order, starts, slots, k, fresh_from, dout, dim, rows, stream_.s));
  }

  // Row-major y (rows x out) is column-major y^T (out x rows): y^T = W x^T with W stored as column-major
  // W^T (in x out), hence op(A) = T on W and op(B) = N on x^T.
  void linear_forward(const float* x, int64_t rows, int in, const float* w, const float* b, int out,
                      float* y) override {
    if (rows == 0) return;
    const int n = checked_int(rows, "rows");
    float beta = 0.0f;
    if (b) {
      CUDA_LAUNCH_CHECK(launch_broadcast_rows(b, rows, out, y, stream_.s));
      beta = 1.0f;
    }
    gemm(CUBLAS_OP_T, CUBLAS_OP_N, out, n, in, w, in, x, in, beta, y, out);
  }

  // dx^T (in x rows) = W^T dy^T; dW^T (in x out) += x^T dy; db += dy^T 1 (all column-major views).
  void linear_backward(const float* x, int64_t rows, int in, const float* w, int out, const float* dy, float* dx,
                       float* dw, float* db) override {
    if (rows == 0) return;
    const int n = checked_int(rows, "rows");
    const float one = 1.0f;
    if (dx) gemm(CUBLAS_OP_N, CUBLAS_OP_N, in, n, out, w, in, dy, out, 0.0f, dx, in);
    gemm(CUBLAS_OP_N, CUBLAS_OP_T, in, out, n, x, in, dy, out, 1.0f, dw, in);
    if (db) {
      if (ones_.bytes() < static_cast<size_t>(rows) * sizeof(float)) {
        ensure(ones_, *this, static_cast<size_t>(rows) * sizeof(float));
        const auto n_ones = static_cast<int64_t>(ones_.bytes() / sizeof(float));
        CUDA_LAUNCH_CHECK(launch_fill(static_cast<float*>(ones_.data()), n_ones, 1.0f, stream_.s));
      }
      CUBLAS_CHECK(cublasSgemv(cublas_.h, CUBLAS_OP_N, out, n, &one, dy, out, static_cast<const float*>(ones_.data()),
                               1, &one, db, 1));
    }
  }

  void cross_entropy(const float* logits, int64_t rows, int vocab, const int32_t* targets, float* dlogits,
                     float grad_scale, double* loss_sum) override {
    ensure(row_loss_, *this, static_cast<size_t>(rows) * sizeof(double));
    vocab_ = vocab;
    CUDA_LAUNCH_CHECK(launch_cross_entropy(logits, rows, vocab, targets, dlogits, grad_scale,
                                           static_cast<double*>(row_loss_.data()), partial(), loss_sum, bad_target(),
                                           stream_.s));
  }

  void dropout(const float* x, int64_t n, float p, uint64_t seed, float* y) override {
    const float keep_scale = 1.0f / (1.0f - p);  // as the CPU backend computes it
    CUDA_LAUNCH_CHECK(launch_dropout(x, n, p, keep_scale, seed, y, stream_.s));
  }

  void pool_forward(const float* y, const Packing& packing, int dim, int directions, Pool pool, float* out,
                    int32_t* argmax) override {
    upload_packing(packing);
    CUDA_LAUNCH_CHECK(launch_pool_forward(y, lengths(), step_offset(), packing.batch(), dim, directions,
                                          static_cast<int>(pool), out, argmax, stream_.s));
  }
  void pool_backward(const float* dout, const Packing& packing, int dim, int directions, Pool pool,
                     const int32_t* argmax, float* dy) override {
    upload_packing(packing);
    CUDA_CHECK(cudaMemsetAsync(dy, 0, static_cast<size_t>(packing.rows()) * dim * sizeof(float), stream_.s));
    CUDA_LAUNCH_CHECK(launch_pool_backward(dout, lengths(), step_offset(), packing.batch(), dim, directions,
                                           static_cast<int>(pool), argmax, dy, stream_.s));
  }
  void sum_squares(const float* x, int64_t n, double* out) override {
    CUDA_LAUNCH_CHECK(launch_sum_squares(x, n, partial(), out, stream_.s));
  }
  double sum_squares(const float* x, int64_t n) override {
    double* out = partial() + kReduceBlocks + 1;
    sum_squares(x, n, out);
    double v = 0;
    start_read(out, 1);
    finish_read(&v);
    return v;
  }

  void scale(float* x, int64_t n, float a) override { CUDA_LAUNCH_CHECK(launch_scale(x, n, a, stream_.s)); }

  void sgd_update(float* p, const float* g, float* velocity, int64_t n, float lr, float momentum,
                  float weight_decay) override {
    CUDA_LAUNCH_CHECK(launch_sgd_update(p, g, velocity, n, lr, momentum, weight_decay, stream_.s));
  }
  void adam_update(float* p, const float* g, float* m, float* v, int64_t n, float lr, float beta1, float beta2,
                   float eps, float weight_decay, bool decoupled, int64_t step) override {
    const AdamScalars bias = adam_scalars(lr, beta1, beta2, step);
    const float step_size = bias.step_size, inv_sqrt_bc2 = bias.inv_sqrt_bc2;
    CUDA_LAUNCH_CHECK(launch_adam_update(p, g, m, v, n, lr, beta1, beta2, eps, weight_decay, decoupled, step_size,
                                  inv_sqrt_bc2, stream_.s));
  }
  void sgd_update_rows(float* p, const float* g, float* velocity, const int32_t* ids, int64_t k, int dim, float lr,
                       float momentum, float weight_decay) override {
    CUDA_LAUNCH_CHECK(launch_sgd_update_rows(p, g, velocity, ids, k, dim, lr, momentum, weight_decay, stream_.s));
  }
  void adam_update_rows(float* p, const float* g, float* m, float* v, const int32_t* ids, int64_t k, int dim,
                        float lr, float beta1, float beta2, float eps, float weight_decay, bool decoupled,
                        int64_t step) override {
    const AdamScalars bias = adam_scalars(lr, beta1, beta2, step);
    CUDA_LAUNCH_CHECK(launch_adam_update_rows(p, g, m, v, ids, k, dim, lr, beta1, beta2, eps, weight_decay, decoupled,
                                              bias.step_size, bias.inv_sqrt_bc2, stream_.s));
  }

  std::unique_ptr<Lstm> create_lstm(const LstmShape& shape, Backend& memory) override {
    return make_cudnn_lstm(memory, ctx_, shape);
  }

 private:
  // The packing's lengths and step offsets in device memory, for the pooling kernels.
  void upload_packing(const Packing& packing) {
    const size_t lb = packing.lengths.size() * sizeof(int32_t), ob = packing.step_offset.size() * sizeof(int64_t);
    const size_t need = (lb + 255) / 256 * 256 + ob;
    ensure(packing_, *this, need);
    packing_lengths_bytes_ = (lb + 255) / 256 * 256;
    upload(packing_.data(), packing.lengths.data(), lb);
    upload(static_cast<char*>(packing_.data()) + packing_lengths_bytes_, packing.step_offset.data(), ob);
  }
  const int32_t* lengths() const { return static_cast<const int32_t*>(packing_.data()); }
  const int64_t* step_offset() const {
    return reinterpret_cast<const int64_t*>(static_cast<const char*>(packing_.data()) + packing_lengths_bytes_);
  }

  void sync_stream() {
    CUDA_CHECK(cudaStreamSynchronize(stream_.s));
    ++syncs_.count;
  }

  // scratch_ holds [kReduceBlocks partial sums | the bad-target word | one double for sum_squares()].
  double* partial() { return static_cast<double*>(scratch_.data()); }
  unsigned long long* bad_target() { return reinterpret_cast<unsigned long long*>(partial() + kReduceBlocks); }

  // C = op(A) op(B) + beta C over fp32 column-major matrices, in the backend's compute type.
  void gemm(cublasOperation_t op_a, cublasOperation_t op_b, int m, int n, int k, const float* a, int lda,
            const float* b, int ldb, float beta, float* c, int ldc) {
    const float alpha = 1.0f;
    CUBLAS_CHECK(cublasGemmEx(cublas_.h, op_a, op_b, m, n, k, &alpha, a, CUDA_R_32F, lda, b, CUDA_R_32F, ldb, &beta,
                              c, CUDA_R_32F, ldc, compute_, CUBLAS_GEMM_DEFAULT));
  }

  Context ctx_;
  std::string name_;
  cudaMemPool_t pool_ = nullptr;
  cublasComputeType_t compute_ = CUBLAS_COMPUTE_32F;
  // Declared in creation order so that they are destroyed in reverse.
  StreamOwner stream_;
  CublasOwner cublas_;
  CudnnOwner cudnn_;
  PinnedOwner pinned_, staging_;
  HostSyncs syncs_;
  size_t staged_ = 0;       // bytes of staging_ that copies issued since the last wait may still read
  int64_t staged_at_ = 0;   // syncs_.count when staged_ was last reset
  int64_t read_at_ = -1;    // syncs_.count when the last start_read() was issued
  int read_n_ = 0;
  bool reading_ = false;    // between start_read() and finish_read()
  int vocab_ = 0;           // of the last cross_entropy(), for its error message
  Buffer scratch_, row_loss_, ones_, packing_;
  size_t packing_lengths_bytes_ = 0;
};

}  // namespace

std::unique_ptr<Backend> create_backend(int local_rank, MathMode math) {
  return std::make_unique<CudaBackend>(local_rank, math);
}

const Context* context_of(const Backend& backend) {
  const auto* cuda = dynamic_cast<const CudaBackend*>(&backend);
  return cuda ? &cuda->context() : nullptr;
}

}  // namespace rnn_dist::cuda

// The CPU backend: host memory, OpenBLAS-backed reference kernels from cpu_kernels.h run by the backend's
// thread team (OpenBLAS itself single-threaded), and a multi-layer LSTM stacking
// cpu::lstm_layer_forward/backward with dropout between layers.
#include "rnn_dist/cpu/cpu_backend.h"

#include <cblas.h>
#include <malloc.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>

#include "rnn_dist/cpu/blas_kernels.h"
#include "rnn_dist/cpu/cpu_kernels.h"
#include "rnn_dist/nn/optimizer.h"
#include "rnn_dist/util/error.h"
#include "rnn_dist/util/random.h"

extern "C" void openblas_set_num_threads(int);

namespace rnn_dist {
namespace {

// Reverses every sequence of a packed batch in place of its rows: row (t, b) <-> row (L_b - 1 - t, b). The
// packing of the reversed batch is the same (the same lengths), so the reverse direction of a
// bidirectional layer is the forward kernel on the reversed rows, and its outputs reversed back: each
// sequence's reverse pass starts at its own last token, as PyTorch's packed nn.LSTM does.
void reverse_rows(const Packing& packing, std::vector<int64_t>& perm) {
  perm.resize(static_cast<size_t>(packing.rows()));
  for (int b = 0; b < packing.batch(); ++b)
    for (int t = 0, L = packing.lengths[b]; t < L; ++t) perm[packing.row(t, b)] = packing.row(L - 1 - t, b);
}

// dst[r, dst_col0 : dst_col0 + width] = src[perm ? perm[r] : r, src_col0 : src_col0 + width] for every
// row; add accumulates instead.
void copy_block(const float* src, int64_t src_stride, int64_t src_col0, float* dst, int64_t dst_stride,
                int64_t dst_col0, int64_t width, int64_t rows, const std::vector<int64_t>* perm, bool add = false) {
  for (int64_t r = 0; r < rows; ++r) {
    const float* from = src + (perm ? (*perm)[r] : r) * src_stride + src_col0;
    float* to = dst + r * dst_stride + dst_col0;
    if (add)
      for (int64_t k = 0; k < width; ++k) to[k] += from[k];
    else
      std::memcpy(to, from, static_cast<size_t>(width) * sizeof(float));
  }
}

class CpuLstm final : public Lstm {
 public:
  CpuLstm(Backend& backend, cpu::Team& team, const LstmShape& shape)
      : backend_(backend), team_(team), shape_(shape), dirs_(shape.bidirectional ? 2 : 1) {
    int64_t offset = 0;
    // PyTorch's order and names: per layer, the forward direction's tensors, then the reverse's.
    for (int l = 0; l < shape.layers; ++l)
      for (int d = 0; d < dirs_; ++d) {
        const int in = input_of(l);
        const int64_t g = 4 * int64_t{shape.hidden};
        const std::string s = cat("_l", l, d ? "_reverse" : "");
        params_.push_back({"weight_ih" + s, offset, {g, in}});
        offset += g * in;
        params_.push_back({"weight_hh" + s, offset, {g, shape.out()}});
        offset += g * shape.out();
        params_.push_back({"bias_ih" + s, offset, {g}});
        offset += g;
        params_.push_back({"bias_hh" + s, offset, {g}});
        offset += g;
        if (shape.proj > 0) {
          params_.push_back({"weight_hr" + s, offset, {shape.proj, shape.hidden}});
          offset += int64_t{shape.proj} * shape.hidden;
        }
      }
    elems_ = offset;
    for (int k = 0; k < shape.layers * dirs_; ++k) cache_.emplace_back(backend, std::vector<int64_t>{0});
    for (int l = 0; l < shape.layers; ++l) {
      out_.emplace_back(backend, std::vector<int64_t>{0});
      in_.emplace_back(backend, std::vector<int64_t>{0});
      reversed_in_.emplace_back(backend, std::vector<int64_t>{0});
    }
    for (Tensor* t : {&workspace_, &grad_a_, &grad_b_, &infer_ws_, &dir_y_, &dir_dy_, &dir_dx_, &reversed_x_, &packed_})
      *t = Tensor(backend, {0});
  }

  int64_t weight_elems() const override { return elems_; }
  std::vector<ParamSlice> canonical_params() const override { return params_; }

  void forward(const float* weights, const Packing& packing, const float* x, const float* h0, const float* c0,
               float* y, float* hn, float* cn, bool training, uint64_t dropout_seed) override {
    if (!training) return infer(weights, packing, x, h0, c0, y, hn, cn);
    packing_ = &packing;
    x_ = x;
    h0_ = h0;
    c0_ = c0;
    seed_ = dropout_seed;
    drop_ = shape_.dropout;
    if (dirs_ == 2) reverse_rows(packing, perm_);
    const int64_t rows = packing.rows(), bh = int64_t{packing.batch()} * shape_.out(),
                  bc = int64_t{packing.batch()} * shape_.hidden;
    const int H = shape_.hidden, R = shape_.out(), P = shape_.proj, W = dirs_ * R;
    reserve(packing, true);
    const float* input = x;
    for (int l = 0; l < shape_.layers; ++l) {
      const bool top = l == shape_.layers - 1;
      float* out = top ? y : out_[l].data();
      if (dirs_ == 2)
        copy_block(input, input_of(l), 0, reversed_in_[l].data(), input_of(l), 0, input_of(l), rows, &perm_);
      run_directions([&](int d, cpu::Team* team, int lane) {
        const int k = l * dirs_ + d;
        // One direction alone writes the layer's output; two write theirs apart, then side by side.
        float* dir_out = dirs_ == 1 ? out : dir_y_.data() + lane * rows * R;
        cpu::lstm_layer_forward<float>(packing, layer(weights, l, d), d ? reversed_in_[l].data() : input,
                                       h0 ? h0 + k * bh : nullptr, c0 ? c0 + k * bc : nullptr, dir_out,
                                       hn ? hn + k * bh : nullptr, cn ? cn + k * bc : nullptr,
                                       cpu::lstm_cache_view(cache_[k].data(), rows, H, P), team, packed(lane));
        if (dirs_ == 2) copy_block(dir_out, R, 0, out, W, d * R, R, rows, d ? &perm_ : nullptr);
      });
      if (!top) {
        if (drop_ > 0) {
          backend_.dropout(out, rows * W, drop_, seed_ + l, in_[l + 1].data());
          input = in_[l + 1].data();
        } else {
          input = out;
        }
      }
    }
  }

  void backward(const float* weights, const float* dy, const float* dhn, const float* dcn, float* dx, float* dh0,
                float* dc0, float* dweights, GradientReady* ready) override {
    const Packing& packing = *packing_;
    const int64_t rows = packing.rows(), bh = int64_t{packing.batch()} * shape_.out(),
                  bc = int64_t{packing.batch()} * shape_.hidden;
    const int H = shape_.hidden, R = shape_.out(), P = shape_.proj, W = dirs_ * R;
    const float* dout = dy;
    for (int l = shape_.layers - 1; l >= 0; --l) {
      const int in = input_of(l);
      const float* input = l == 0 ? x_ : (drop_ > 0 ? in_[l].data() : out_[l - 1].data());
      Tensor& gin = (l % 2) ? grad_a_ : grad_b_;
      float* din = l > 0 ? gin.data() : dx;
      // Two directions: each one's columns of the output gradient (in its own row order), and its input
      // gradient, reversed back and summed with the other's, the forward direction's first.
      auto add_input_gradient = [&](int d, int lane) {
        copy_block(dir_dx_.data() + lane * rows * in, in, 0, din, in, 0, in, rows, d ? &perm_ : nullptr, d == 1);
      };
      run_directions([&](int d, cpu::Team* team, int lane) {
        const int k = l * dirs_ + d;
        const float* dir_dy = dout;
        float* dir_dx = din;
        if (dirs_ == 2) {
          float* lane_dy = dir_dy_.data() + lane * rows * R;
          copy_block(dout, W, d * R, lane_dy, R, 0, R, rows, d ? &perm_ : nullptr);
          dir_dy = lane_dy;
          if (din) dir_dx = dir_dx_.data() + lane * rows * in;
        }
        cpu::lstm_layer_backward<float>(packing, layer(weights, l, d), d ? reversed_in_[l].data() : input,
                                        h0_ ? h0_ + k * bh : nullptr, c0_ ? c0_ + k * bc : nullptr,
                                        cpu::lstm_cache_view(cache_[k].data(), rows, H, P), dir_dy,
                                        dhn ? dhn + k * bh : nullptr, dcn ? dcn + k * bc : nullptr, dir_dx,
                                        dh0 ? dh0 + k * bh : nullptr, dc0 ? dc0 + k * bc : nullptr,
                                        grads(dweights, l, d), workspace_.data() + lane * workspace_lane_, team,
                                        packed(lane));
        if (dirs_ == 2 && din && !side_by_side()) add_input_gradient(d, lane);
      });
      if (side_by_side() && din)
        for (int d = 0; d < dirs_; ++d) add_input_gradient(d, d);
      // Layer l's weights (both directions) are final, and so are those of every layer above it.
      if (ready) ready->final_from(params_[size_t(per_direction() * l * dirs_)].offset);
      if (l > 0 && drop_ > 0) backend_.dropout(din, rows * in, drop_, seed_ + (l - 1), din);
      dout = din;
    }
  }

  void reserve(const Packing& packing, bool training) override {
    const int64_t rows = packing.rows(), W = dirs_ * shape_.out(), R = shape_.out();
    const int H = shape_.hidden, P = shape_.proj;
    // The layers' inputs are at most max(input, W) wide; the buffers alternating between layers hold the
    // outputs of layers 0 .. L-2 in inference, the input gradients of layers 1 .. L-1 in training (W wide).
    const int64_t widest_in = shape_.layers > 1 ? std::max<int64_t>(shape_.input, W) : shape_.input;
    const int lanes = side_by_side() ? 2 : 1;
    if (dirs_ == 2) dir_y_.resize({lanes * rows, R});
    const int members = lanes == 2 ? 1 : team_.size();  // of the team that runs one direction
    packed_lane_ = static_cast<int64_t>(cpu::lstm_packed_elems(static_cast<int>(widest_in), H, P, members));
    packed_.resize(lanes * packed_lane_);
    if (!training) {
      infer_lane_ = static_cast<int64_t>(cpu::lstm_inference_workspace_elems(rows, packing.batch(), H, P));
      infer_ws_.resize(lanes * infer_lane_);
      for (int l = 0; l + 1 < shape_.layers; ++l) ((l % 2) ? grad_a_ : grad_b_).resize({rows, W});
      if (dirs_ == 2) reversed_x_.resize({rows, widest_in});
      return;
    }
    for (int l = 0; l < shape_.layers; ++l) {
      const bool top = l == shape_.layers - 1;
      if (!top) out_[l].resize({rows, W});
      if (!top && shape_.dropout > 0) in_[l + 1].resize({rows, W});
      if (dirs_ == 2) reversed_in_[l].resize({rows, int64_t{input_of(l)}});
      for (int d = 0; d < dirs_; ++d) cache_[size_t(l * dirs_ + d)].resize(int64_t(cpu::lstm_cache_elems(rows, H, P)));
      if (l > 0) ((l % 2) ? grad_a_ : grad_b_).resize({rows, int64_t{input_of(l)}});
    }
    workspace_lane_ = static_cast<int64_t>(cpu::lstm_backward_workspace_elems(rows, packing.batch(), H, P));
    workspace_.resize(lanes * workspace_lane_);
    if (dirs_ == 2) {
      dir_dy_.resize({lanes * rows, R});
      dir_dx_.resize({lanes * rows, widest_in});
    }
  }

 private:
  int input_of(int l) const { return l == 0 ? shape_.input : dirs_ * shape_.out(); }

  // With a team of two, a bidirectional layer runs its directions side by side, one member each, each
  // direction computed as on one thread: no barrier per time step and products of the whole width, where
  // splitting each direction's units over both members met twice a step and halved every product (the
  // classifier's shape B: the LSTM 1.13x faster, docs/benchmarks.md). Each member then has a lane of its
  // own in the buffers a direction writes: workspaces, packed weights, dir_y_, dir_dy_ and dir_dx_.
  // Otherwise the directions run one after the other on the whole team, in lane 0.
  bool side_by_side() const { return dirs_ == 2 && team_.size() == 2; }
  // fn(direction, team to run it on, lane) for each direction.
  template <class Fn>
  void run_directions(Fn&& fn) {
    if (side_by_side()) return team_.run([&](int m) { fn(m, nullptr, m); });
    for (int d = 0; d < dirs_; ++d) fn(d, &team_, 0);
  }
  float* packed(int lane) { return packed_.data() + lane * packed_lane_; }
  int per_direction() const { return shape_.proj > 0 ? 5 : 4; }  // tensors of one direction of a layer

  // Forward pass without dropout that keeps nothing for backward: layer outputs alternate between two
  // buffers and the gate workspace is bounded (cpu::lstm_layer_inference). The training state is untouched.
  void infer(const float* weights, const Packing& packing, const float* x, const float* h0, const float* c0,
             float* y, float* hn, float* cn) {
    const int64_t rows = packing.rows(), bh = int64_t{packing.batch()} * shape_.out(),
                  bc = int64_t{packing.batch()} * shape_.hidden;
    const int R = shape_.out(), W = dirs_ * R;
    reserve(packing, false);
    if (dirs_ == 2) reverse_rows(packing, perm_);
    const float* input = x;
    for (int l = 0; l < shape_.layers; ++l) {
      const bool top = l == shape_.layers - 1;
      float* out = top ? y : ((l % 2) ? grad_a_ : grad_b_).data();
      if (dirs_ == 2)
        copy_block(input, input_of(l), 0, reversed_x_.data(), input_of(l), 0, input_of(l), rows, &perm_);
      run_directions([&](int d, cpu::Team* team, int lane) {
        const int k = l * dirs_ + d;
        float* dir_out = dirs_ == 1 ? out : dir_y_.data() + lane * rows * R;
        cpu::lstm_layer_inference<float>(packing, layer(weights, l, d), d ? reversed_x_.data() : input,
                                         h0 ? h0 + k * bh : nullptr, c0 ? c0 + k * bc : nullptr, dir_out,
                                         hn ? hn + k * bh : nullptr, cn ? cn + k * bc : nullptr,
                                         infer_ws_.data() + lane * infer_lane_, team, packed(lane));
        if (dirs_ == 2) copy_block(dir_out, R, 0, out, W, d * R, R, rows, d ? &perm_ : nullptr);
      });
      input = out;
    }
  }

  cpu::LstmLayerParams<float> layer(const float* w, int l, int d) const {
    const ParamSlice* s = &params_[size_t(per_direction() * (l * dirs_ + d))];
    cpu::LstmLayerParams<float> p{w + s[0].offset, w + s[1].offset, w + s[2].offset, w + s[3].offset,
                                  input_of(l),     shape_.hidden};
    if (shape_.proj > 0) p.w_hr = w + s[4].offset, p.proj = shape_.proj;
    return p;
  }
  cpu::LstmLayerGrads<float> grads(float* g, int l, int d) const {
    const ParamSlice* s = &params_[size_t(per_direction() * (l * dirs_ + d))];
    cpu::LstmLayerGrads<float> r{g + s[0].offset, g + s[1].offset, g + s[2].offset, g + s[3].offset};
    if (shape_.proj > 0) r.w_hr = g + s[4].offset;
    return r;
  }

  Backend& backend_;
  cpu::Team& team_;
  LstmShape shape_;
  const int dirs_;
  std::vector<ParamSlice> params_;
  int64_t elems_ = 0;
  // State of the last training forward, used by backward.
  const Packing* packing_ = nullptr;
  const float *x_ = nullptr, *h0_ = nullptr, *c0_ = nullptr;
  uint64_t seed_ = 0;
  float drop_ = 0;
  std::vector<int64_t> perm_;  // two directions: reverse_rows() of the last batch
  // Per layer and direction: saved activations; per layer: outputs, dropped inputs, reversed inputs.
  std::vector<Tensor> cache_, out_, in_, reversed_in_;
  // Backward workspace; the input gradients of layers > 0 (in inference: the layer outputs); inference
  // workspace; one direction's output, output gradient and input gradient; inference's reversed input.
  Tensor workspace_, grad_a_, grad_b_, infer_ws_, dir_y_, dir_dy_, dir_dx_, reversed_x_;
  Tensor packed_;  // the recurrent weights packed for the time loop (cpu::lstm_packed_elems), any layer's
  int64_t packed_lane_ = 0, workspace_lane_ = 0, infer_lane_ = 0;  // elements of each lane (side_by_side())
};

class CpuBackend final : public Backend {
 public:
  // OpenBLAS runs single-threaded inside each member of the team (its own threads would allocate on every
  // GEMM and split the small per-step products badly).
  //
  // Blocks of 1 MiB and more are mapped and unmapped by glibc on their own (a fixed threshold: its
  // default rises to 32 MiB after the first such free), so that a freed checkpoint copy or a
  // workspace outgrown returns to the system, and the resident peak is what a MemoryPlan predicts.
  explicit CpuBackend(int threads) : team_(std::max(1, threads)), blas_kernels_(cpu::blas_kernels()) {
    openblas_set_num_threads(1);
    mallopt(M_MMAP_THRESHOLD, 1 << 20);
    cpu::prime_blas_buffers(team_);
  }

  Device device() const override { return Device{DeviceType::cpu, 0}; }
  std::string device_name() const override {
    const bool packed = cpu::weight_gradients() == cpu::WeightGradients::packed;
    return "cpu (" + blas_kernels_ + (packed ? "; weight gradients on rnn_dist's packed kernel" : "") + ")";
  }

  void* allocate(size_t bytes) override {
    // 64-byte alignment for vector loads; sizes rounded up as aligned_alloc requires.
    void* p = std::aligned_alloc(64, (bytes + 63) / 64 * 64);
    if (!p) throw Error(cat("out of host memory allocating ", bytes, " bytes"));
    return p;
  }
  void deallocate(void* p) noexcept override { std::free(p); }
  void upload(void* dst, const void* src, size_t bytes) override { std::memcpy(dst, src, bytes); }
  void download(void* dst, const void* src, size_t bytes) override { std::memcpy(dst, src, bytes); }
  void copy(void* dst, const void* src, size_t bytes) override { std::memmove(dst, src, bytes); }
  void zero(float* x, int64_t n) override {
    each(n, [&](int64_t i0, int64_t i1) { std::memset(x + i0, 0, static_cast<size_t>(i1 - i0) * sizeof(float)); });
  }
  // Single-threaded (not the team): they may run on a communication thread.
  void to_bf16(Bf16* dst, const float* src, int64_t n) override {
    for (int64_t i = 0; i < n; ++i) dst[i] = rnn_dist::to_bf16(src[i]);
  }
  void from_bf16(float* dst, const Bf16* src, int64_t n) override {
    for (int64_t i = 0; i < n; ++i) dst[i] = rnn_dist::from_bf16(src[i]);
  }
  void synchronize() override {}
  // The GPU's rules, so that a caller that breaks them fails here too.
  void start_read(const double* device, int n) override {
    if (n < 0 || n > kMaxRead) throw Error(cat("start_read of ", n, " doubles (at most ", kMaxRead, ")"));
    if (reading_) throw Error("start_read while the last read is unfinished (one read at a time)");
    std::copy_n(device, n, read_);
    read_n_ = n;
    reading_ = true;
  }
  void finish_read(double* host) override {
    if (!reading_) throw Error("finish_read without start_read");
    reading_ = false;
    std::copy_n(read_, read_n_, host);
  }
  int64_t host_syncs() const override { return 0; }
  int64_t logits_block_elems() const override { return int64_t{1} << 22; }  // 16 MB

  void embedding_forward(const int32_t* ids, int64_t rows, const float* table, int dim, float* out) override {
    cpu::embedding_forward<float>(ids, rows, table, dim, out, &team_);
  }
  void embedding_backward(const int32_t* ids, int64_t rows, const float* dout, int dim, float* dtable) override {
    cpu::embedding_backward<float>(ids, rows, dout, dim, dtable, &team_);
  }
  void embedding_backward_rows(const int32_t* order, const int32_t* starts, const int32_t* slots, int64_t k,
                               int64_t fresh_from, const float* dout, int dim, float* rows) override {
    cpu::embedding_backward_rows<float>(order, starts, slots, k, fresh_from, dout, dim, rows, &team_);
  }
  void linear_forward(const float* x, int64_t rows, int in, const float* w, const float* b, int out,
                      float* y) override {
    cpu::linear_forward<float>(x, rows, in, w, b, out, y, &team_);
  }
  void linear_backward(const float* x, int64_t rows, int in, const float* w, int out, const float* dy, float* dx,
                       float* dw, float* db) override {
    cpu::linear_backward<float>(x, rows, in, w, out, dy, dx, dw, db, &team_);
  }
  void cross_entropy(const float* logits, int64_t rows, int vocab, const int32_t* targets, float* dlogits,
                     float grad_scale, double* loss_sum) override {
    *loss_sum += cpu::cross_entropy<float>(logits, rows, vocab, targets, dlogits, grad_scale, &team_);
  }
  void dropout(const float* x, int64_t n, float p, uint64_t seed, float* y) override {
    const float keep_scale = 1.0f / (1.0f - p);
    each(n, [&](int64_t i0, int64_t i1) {
      for (int64_t i = i0; i < i1; ++i)
        y[i] = uniform01(seed, static_cast<uint64_t>(i)) < p ? 0.0f : x[i] * keep_scale;
    });
  }
  void pool_forward(const float* y, const Packing& packing, int dim, int directions, Pool pool, float* out,
                    int32_t* argmax) override {
    cpu::pool_forward<float>(y, packing, dim, directions, pool, out, argmax);
  }
  void pool_backward(const float* dout, const Packing& packing, int dim, int directions, Pool pool,
                     const int32_t* argmax, float* dy) override {
    cpu::pool_backward<float>(dout, packing, dim, directions, pool, argmax, dy);
  }
  void sum_squares(const float* x, int64_t n, double* out) override { *out = sum_squares(x, n); }
  double sum_squares(const float* x, int64_t n) override {
    // Per-member partial sums, added in member order: the result does not depend on timing.
    double part[cpu::Team::kMaxSize] = {};
    team_.run([&](int m) {
      const auto [i0, i1] = cpu::share(n, team_.size(), m);
      // Eight running sums, so that the adds do not wait for each other (one chain of double adds ran at
      // a quarter of the memory's speed: 18% of an adaptive-softmax step); added in a fixed order.
      double s8[8] = {};
      int64_t i = i0;
      for (; i + 8 <= i1; i += 8)
        for (int k = 0; k < 8; ++k) s8[k] += double{x[i + k]} * x[i + k];
      double s = 0;
      for (; i < i1; ++i) s += double{x[i]} * x[i];
      for (double v : s8) s += v;
      part[m] = s;
    });
    double s = 0;
    for (double v : part) s += v;
    return s;
  }
  void scale(float* x, int64_t n, float a) override {
    each(n, [&](int64_t i0, int64_t i1) {
      for (int64_t i = i0; i < i1; ++i) x[i] *= a;
    });
  }
  void sgd_update(float* p, const float* g, float* velocity, int64_t n, float lr, float momentum,
                  float weight_decay) override {
    each(n, [&](int64_t i0, int64_t i1) { sgd_elements(p, g, velocity, i1 - i0, i0, i0, lr, momentum, weight_decay); });
  }
  void sgd_update_rows(float* p, const float* g, float* velocity, const int32_t* ids, int64_t k, int dim, float lr,
                       float momentum, float weight_decay) override {
    rows(k, [&](int64_t j) {
      sgd_elements(p, g, velocity, dim, int64_t{ids[j]} * dim, j * dim, lr, momentum, weight_decay);
    });
  }
  void adam_update(float* p, const float* g, float* m, float* v, int64_t n, float lr, float beta1, float beta2,
                   float eps, float weight_decay, bool decoupled, int64_t step) override {
    const AdamScalars bias = adam_scalars(lr, beta1, beta2, step);
    each(n, [&](int64_t i0, int64_t i1) {
      adam_elements(p, g, m, v, i1 - i0, i0, i0, lr, beta1, beta2, eps, weight_decay, decoupled, bias);
    });
  }
  void adam_update_rows(float* p, const float* g, float* m, float* v, const int32_t* ids, int64_t k, int dim,
                        float lr, float beta1, float beta2, float eps, float weight_decay, bool decoupled,
                        int64_t step) override {
    const AdamScalars bias = adam_scalars(lr, beta1, beta2, step);
    rows(k, [&](int64_t j) {
      adam_elements(p, g, m, v, dim, int64_t{ids[j]} * dim, j * dim, lr, beta1, beta2, eps, weight_decay, decoupled,
                    bias);
    });
  }

  std::unique_ptr<Lstm> create_lstm(const LstmShape& shape, Backend& memory) override {
    return std::make_unique<CpuLstm>(memory, team_, shape);
  }

 private:
  // The updates' formulas (optimizer.h), one implementation for the flat buffers and the rows of a table:
  // n elements from p[at] (and the state's) with g[from].
  static void sgd_elements(float* p, const float* g, float* velocity, int64_t n, int64_t at, int64_t from, float lr,
                           float momentum, float weight_decay) {
    for (int64_t i = 0; i < n; ++i) {
      const int64_t e = at + i;
      float d = g[from + i] + weight_decay * p[e];
      if (momentum != 0) {
        velocity[e] = momentum * velocity[e] + d;
        d = velocity[e];
      }
      p[e] -= lr * d;
    }
  }
  static void adam_elements(float* p, const float* g, float* m, float* v, int64_t n, int64_t at, int64_t from,
                            float lr, float beta1, float beta2, float eps, float weight_decay, bool decoupled,
                            AdamScalars bias) {
    for (int64_t i = 0; i < n; ++i) {
      const int64_t e = at + i;
      float grad = g[from + i];
      if (decoupled)
        p[e] -= lr * weight_decay * p[e];
      else
        grad += weight_decay * p[e];
      m[e] = beta1 * m[e] + (1 - beta1) * grad;
      v[e] = beta2 * v[e] + (1 - beta2) * grad * grad;
      p[e] -= bias.step_size * m[e] / (std::sqrt(v[e]) * bias.inv_sqrt_bc2 + eps);
    }
  }
  // fn(j) for j in [0, k), the rows shared among the members.
  template <class Fn>
  void rows(int64_t k, Fn&& fn) {
    team_.run([&](int m) {
      const auto [j0, j1] = cpu::share(k, team_.size(), m);
      for (int64_t j = j0; j < j1; ++j) fn(j);
    });
  }
  // fn(begin, end) on each member's share of [0, n), cut at multiples of 16 floats (no shared cache line).
  template <class Fn>
  void each(int64_t n, Fn&& fn) {
    team_.run([&](int m) {
      const auto [i0, i1] = cpu::share(n, team_.size(), m, 16);
      if (i0 < i1) fn(i0, i1);
    });
  }

  cpu::Team team_;
  std::string blas_kernels_;  // the OpenBLAS kernels the products run on (cpu/blas_kernels.h)
  double read_[kMaxRead] = {};
  int read_n_ = 0;
  bool reading_ = false;
};

}  // namespace

std::unique_ptr<Backend> make_cpu_backend(int threads) { return std::make_unique<CpuBackend>(threads); }

}  // namespace rnn_dist

// The GPU LSTM: cuDNN's multi-layer LSTM (cuDNN >= 9 RNN API) over packed batches
// (CUDNN_RNN_DATA_LAYOUT_SEQ_MAJOR_PACKED, the layout of nn/packing.h). The weight region the model hands
// in IS cuDNN's weight space; canonical_params() names the PyTorch tensors inside it. With MathMode::bf16
// the region keeps the fp32 master weights in the order of cuDNN's bf16 weight space (one float per bf16
// element): every call converts weights and inputs to bf16, runs cuDNN on bf16 data with fp32 math, and
// converts outputs and gradients back (the weight gradient is added to the fp32 one).
//
// Why canonical views can be slices: cudnnGetRNNWeightParams reports, per layer, one matrix per gate
// (linLayerID 0-3: W_i, W_f, W_g, W_o on the input; 4-7: R_i, R_f, R_g, R_o on h) and one bias per gate,
// in PyTorch's gate order i, f, g, o. PyTorch's nn.LSTM keeps its weight_ih/weight_hh/bias_ih/bias_hh as
// views into this same weight space (aten/src/ATen/native/cudnn/RNN.cpp, get_parameters), which works
// because cuDNN places the four gate matrices of each kind back to back: then PyTorch's stacked 4H x in
// matrix is one slice. cuDNN does not document that placement, so the constructor verifies it for every
// layer and refuses clearly if a cuDNN version ever lays the gates out otherwise.
//
// A projection (--proj-size P, PyTorch's proj_size) is cuDNN's recurrent projection: projSize P of
// cudnnSetRNNDescriptor_v8, its P x H matrix linLayerID 8 of each pseudo-layer (no bias); h, y and the
// recurrent matrices are then P wide, c stays H wide.
//
// Bidirectional (CUDNN_BIDIRECTIONAL): cuDNN's pseudo-layer l * 2 + d holds direction d of layer l (d = 1
// reverse, PyTorch's *_reverse), its y rows are both directions side by side and its states (layers * 2)
// x B x H: the layout of the Lstm interface, so nothing is copied. Over a packed batch cuDNN runs each
// sequence's reverse direction from that sequence's own last token, as PyTorch's packed sequences rely on.
#include <algorithm>
#include <cstdint>
#include <utility>
#include <vector>

#include "cuda_backend.h"
#include "cuda_check.h"
#include "kernels.h"
#include "rnn_dist/util/error.h"

namespace rnn_dist::cuda {
namespace {

// cuDNN documents no alignment for the weight space; the model starts every parameter region at
// cudaMalloc's alignment (kAlignElems), so cuDNN works on the region in place, and anything else is refused.
constexpr uintptr_t kWeightAlign = kAlignElems * sizeof(float);

template <class T, cudnnStatus_t (*Create)(T*), cudnnStatus_t (*Destroy)(T)>
class Descriptor {
 public:
  Descriptor() { CUDNN_CHECK(Create(&d_)); }
  ~Descriptor() { CUDNN_WARN(Destroy(d_)); }
  Descriptor(const Descriptor&) = delete;
  Descriptor& operator=(const Descriptor&) = delete;
  T get() const { return d_; }

 private:
  T d_ = nullptr;
};
using RnnDesc = Descriptor<cudnnRNNDescriptor_t, cudnnCreateRNNDescriptor, cudnnDestroyRNNDescriptor>;
using DropoutDesc = Descriptor<cudnnDropoutDescriptor_t, cudnnCreateDropoutDescriptor, cudnnDestroyDropoutDescriptor>;
using DataDesc = Descriptor<cudnnRNNDataDescriptor_t, cudnnCreateRNNDataDescriptor, cudnnDestroyRNNDataDescriptor>;
using TensorDesc = Descriptor<cudnnTensorDescriptor_t, cudnnCreateTensorDescriptor, cudnnDestroyTensorDescriptor>;

const float* require_aligned(const float* p, const char* what) {
  if (reinterpret_cast<uintptr_t>(p) % kWeightAlign != 0)
    throw Error(cat("CudnnLstm: ", what, " are not ", kWeightAlign, "-byte aligned (", cuda::where(), ")"));
  return p;
}

// The descriptors and device sequence lengths of one batch shape; training and inference each have their
// own, so an evaluation between a training forward and its backward leaves the latter intact.
struct BatchDescs {
  DataDesc x, y;
  TensorDesc h, c;  // (layers * directions) x B x R (h; R = P with a projection, else H) and x H (c)
  Buffer seq_lengths;
  size_t workspace = 0;  // cuDNN's workspace for these descriptors, in bytes
  Buffer x16, y16, h0_16, c0_16, hn16, cn16;  // bf16 copies of the call's data (MathMode::bf16)
};

// Grows `b` to n bf16 values and converts src into it; nullptr for a null src.
const uint16_t* to_bf16(const float* src, int64_t n, Buffer& b, Backend& backend, cudaStream_t stream) {
  if (!src) return nullptr;
  ensure(b, backend, static_cast<size_t>(n) * sizeof(uint16_t));
  auto* out = static_cast<uint16_t*>(b.data());
  CUDA_LAUNCH_CHECK(launch_to_bf16(src, n, out, stream));
  return out;
}

// A bf16 buffer of n values for cuDNN to write, when the fp32 destination is wanted (else nullptr).
uint16_t* bf16_out(const float* wanted, int64_t n, Buffer& b, Backend& backend) {
  if (!wanted) return nullptr;
  ensure(b, backend, static_cast<size_t>(n) * sizeof(uint16_t));
  return static_cast<uint16_t*>(b.data());
}

void from_bf16(const uint16_t* src, int64_t n, float* dst, cudaStream_t stream) {
  if (dst) CUDA_LAUNCH_CHECK(launch_from_bf16(src, n, dst, stream));
}

class CudnnLstm final : public Lstm {
 public:
  CudnnLstm(Backend& backend, const Context& ctx, const LstmShape& shape)
      : backend_(backend),
        ctx_(ctx),
        shape_(shape),
        bf16_(ctx.math == MathMode::bf16),
        dtype_(bf16_ ? CUDNN_DATA_BFLOAT16 : CUDNN_DATA_FLOAT),
        elem_(bf16_ ? sizeof(uint16_t) : sizeof(float)),
        directions_(shape.bidirectional ? 2 : 1),
        out_(int64_t{directions_} * shape.out()) {
    if (shape.input < 1 || shape.hidden < 1 || shape.layers < 1)
      throw Error(cat("CudnnLstm: invalid shape input ", shape.input, ", hidden ", shape.hidden, ", layers ",
                      shape.layers));
    if (bf16_ && cudnnGetVersion() < 91300)
      throw Error(cat("--precision bf16: cuDNN ", cudnnGetVersion(), " has no bf16 LSTM (it needs cuDNN >= 9.13); ",
                      "use --precision tf32"));
    inter_layer_dropout_ = shape.dropout > 0 && shape.layers > 1;
    CUDNN_CHECK(cudnnSetDropoutDescriptor(dropout_.get(), ctx_.cudnn, 0.0f, nullptr, 0, 0));
    set_rnn_descriptor();
    CUDNN_CHECK(cudnnGetRNNWeightSpaceSize(ctx_.cudnn, rnn_.get(), &weight_bytes_));
    if (weight_bytes_ % elem_ != 0)
      throw Error(cat("cuDNN reports a weight space of ", weight_bytes_, " bytes, not a whole number of values"));
    locate_params();
  }

  int64_t weight_elems() const override { return static_cast<int64_t>(weight_bytes_ / elem_); }
  std::vector<ParamSlice> canonical_params() const override { return params_; }

  void forward(const float* weights, const Packing& packing, const float* x, const float* h0, const float* c0,
               float* y, float* hn, float* cn, bool training, uint64_t dropout_seed) override {
    BatchDescs& d = training ? train_ : infer_;
    if (training && inter_layer_dropout_ && !dropout_seeded_) seed_dropout(dropout_seed);
    reserve(packing, training);
    const cudnnForwardMode_t mode = training ? CUDNN_FWD_MODE_TRAINING : CUDNN_FWD_MODE_INFERENCE;
    const size_t ws = d.workspace, rs = training ? reserve_bytes_ : 0;
    const int64_t rows = packing.rows();
    const int64_t hstate = h_elems(packing.batch()), cstate = c_elems(packing.batch());
    // What cuDNN reads and writes: the caller's fp32 buffers, or their bf16 copies.
    const void *w = nullptr, *xin = x, *h0in = h0, *c0in = c0;
    void *yout = y, *hnout = hn, *cnout = cn;
    if (bf16_) {
      const cudaStream_t st = ctx_.stream;
      w = to_bf16(weights, weight_elems(), weights16_, backend_, st);
      xin = to_bf16(x, rows * shape_.input, d.x16, backend_, st);
      h0in = to_bf16(h0, hstate, d.h0_16, backend_, st);
      c0in = to_bf16(c0, cstate, d.c0_16, backend_, st);
      yout = bf16_out(y, rows * out_, d.y16, backend_);
      hnout = bf16_out(hn, hstate, d.hn16, backend_);
      cnout = bf16_out(cn, cstate, d.cn16, backend_);
    } else {
      w = require_aligned(weights, "the weights");
    }
    CUDNN_CHECK(cudnnRNNForward(ctx_.cudnn, rnn_.get(), mode, static_cast<const int32_t*>(d.seq_lengths.data()),
                                d.x.get(), xin, d.y.get(), yout, d.h.get(), h0in, hnout, d.c.get(), c0in, cnout,
                                weight_bytes_, w, ws, workspace_.data(), rs, training ? reserve_.data() : nullptr));
    if (bf16_) {
      from_bf16(static_cast<const uint16_t*>(yout), rows * out_, y, ctx_.stream);
      from_bf16(static_cast<const uint16_t*>(hnout), hstate, hn, ctx_.stream);
      from_bf16(static_cast<const uint16_t*>(cnout), cstate, cn, ctx_.stream);
    }
    if (training) saved_ = {xin, yout, h0in, c0in, rows, hstate, cstate, true};
  }

  // cuDNN's workspace and reserve space for the packing, and in bf16 the copies of the data (those of the
  // states as if every one were given) and of the weights and their gradient. The dropout generator's
  // states are allocated by the first training forward, and are not counted here.
  void reserve(const Packing& packing, bool training) override {
    BatchDescs& d = training ? train_ : infer_;
    describe(d, packing);
    const cudnnForwardMode_t mode = training ? CUDNN_FWD_MODE_TRAINING : CUDNN_FWD_MODE_INFERENCE;
    size_t ws = 0, rs = 0;
    CUDNN_CHECK(cudnnGetRNNTempSpaceSizes(ctx_.cudnn, rnn_.get(), mode, d.x.get(), &ws, &rs));
    ensure(workspace_, backend_, ws);
    d.workspace = ws;
    if (training) {
      ensure(reserve_, backend_, rs);
      reserve_bytes_ = rs;
      workspace_bytes_ = ws;
    }
    if (!bf16_) return;
    const size_t rows = static_cast<size_t>(packing.rows()), half = sizeof(uint16_t),
                 hstate = size_t(h_elems(packing.batch())) * half, cstate = size_t(c_elems(packing.batch())) * half;
    ensure(weights16_, backend_, weight_bytes_);
    ensure(d.x16, backend_, rows * shape_.input * half);
    ensure(d.y16, backend_, rows * out_ * half);
    for (Buffer* b : {&d.h0_16, &d.hn16}) ensure(*b, backend_, hstate);
    for (Buffer* b : {&d.c0_16, &d.cn16}) ensure(*b, backend_, cstate);
    if (!training) return;
    ensure(dweights16_, backend_, weight_bytes_);
    ensure(dy16_, backend_, rows * out_ * half);
    ensure(dx16_, backend_, rows * shape_.input * half);
    for (Buffer* b : {&dhn16_, &dh0_16_}) ensure(*b, backend_, hstate);
    for (Buffer* b : {&dcn16_, &dc0_16_}) ensure(*b, backend_, cstate);
  }

  void backward(const float* weights, const float* dy, const float* dhn, const float* dcn, float* dx, float* dh0,
                float* dc0, float* dweights, GradientReady* ready) override {
    if (!saved_.valid) throw Error("CudnnLstm::backward without a training forward before it");
    const int64_t rows = saved_.rows, hstate = saved_.hstate, cstate = saved_.cstate, Y = out_;
    const cudaStream_t st = ctx_.stream;
    // cuDNN wants every data gradient buffer; absent ones become zeros (dy) or a discarded scratch (dx).
    const void *w = nullptr, *dyin = dy, *dhnin = dhn, *dcnin = dcn;
    void *dxout = dx, *dh0out = dh0, *dc0out = dc0;
    if (bf16_) {
      w = weights16_.data();  // converted by the training forward, from the same weights
      if (dy) {
        dyin = to_bf16(dy, rows * Y, dy16_, backend_, st);
      } else {
        ensure(dy16_, backend_, static_cast<size_t>(rows * Y) * sizeof(uint16_t));
        CUDA_CHECK(cudaMemsetAsync(dy16_.data(), 0, static_cast<size_t>(rows * Y) * sizeof(uint16_t), st));
        dyin = dy16_.data();
      }
      dhnin = to_bf16(dhn, hstate, dhn16_, backend_, st);
      dcnin = to_bf16(dcn, cstate, dcn16_, backend_, st);
      ensure(dx16_, backend_, static_cast<size_t>(rows) * shape_.input * sizeof(uint16_t));
      dxout = dx16_.data();
      dh0out = bf16_out(dh0, hstate, dh0_16_, backend_);
      dc0out = bf16_out(dc0, cstate, dc0_16_, backend_);
    } else {
      if (!dy) {
        ensure(dy_zero_, backend_, static_cast<size_t>(rows) * Y * sizeof(float));
        backend_.zero(static_cast<float*>(dy_zero_.data()), rows * Y);
        dyin = dy_zero_.data();
      }
      if (!dx) {
        ensure(dx_scratch_, backend_, static_cast<size_t>(rows) * shape_.input * sizeof(float));
        dxout = dx_scratch_.data();
      }
      w = require_aligned(weights, "the weights");
      require_aligned(dweights, "the weight gradients");
    }
    const auto* seq = static_cast<const int32_t*>(train_.seq_lengths.data());
    CUDNN_CHECK(cudnnRNNBackwardData_v8(ctx_.cudnn, rnn_.get(), seq, train_.y.get(), saved_.y, dyin, train_.x.get(),
                                        dxout, train_.h.get(), saved_.h0, dhnin, dh0out, train_.c.get(), saved_.c0,
                                        dcnin, dc0out, weight_bytes_, w, workspace_bytes_, workspace_.data(),
                                        reserve_bytes_, reserve_.data()));
    if (bf16_) {
      from_bf16(static_cast<const uint16_t*>(dxout), rows * shape_.input, dx, st);
      from_bf16(static_cast<const uint16_t*>(dh0out), hstate, dh0, st);
      from_bf16(static_cast<const uint16_t*>(dc0out), cstate, dc0, st);
    }
    // In fp32 cuDNN adds into dweights itself; in bf16 the gradient lands in a zeroed bf16 buffer and is
    // then added to the fp32 one.
    void* dw = dweights;
    if (bf16_) {
      ensure(dweights16_, backend_, weight_bytes_);
      CUDA_CHECK(cudaMemsetAsync(dweights16_.data(), 0, weight_bytes_, st));
      dw = dweights16_.data();
    }
    // Must follow the data gradient: it reads what that call left in the workspace and reserve space.
    CUDNN_CHECK(cudnnRNNBackwardWeights_v8(ctx_.cudnn, rnn_.get(), CUDNN_WGRAD_MODE_ADD, seq, train_.x.get(),
                                           saved_.x, train_.h.get(), saved_.h0, train_.y.get(), saved_.y,
                                           weight_bytes_, dw, workspace_bytes_, workspace_.data(), reserve_bytes_,
                                           reserve_.data()));
    if (bf16_) CUDA_LAUNCH_CHECK(launch_add_from_bf16(dweights, static_cast<const uint16_t*>(dw), weight_elems(), st));
    // One call computes every layer's weight gradient.
    if (ready) ready->final_from(0);
  }

 private:
  // Elements of h (R wide) and of c (H wide) for all layers and directions of a batch of B sequences.
  int64_t h_elems(int B) const { return int64_t{shape_.layers} * directions_ * B * shape_.out(); }
  int64_t c_elems(int B) const { return int64_t{shape_.layers} * directions_ * B * shape_.hidden; }

  // Takes the inter-layer dropout from dropout_: off (p = 0) until the first training forward seeds it.
  void set_rnn_descriptor() {
    CUDNN_CHECK(cudnnSetRNNDescriptor_v8(
        rnn_.get(), CUDNN_RNN_ALGO_STANDARD, CUDNN_LSTM, CUDNN_RNN_DOUBLE_BIAS,
        directions_ == 2 ? CUDNN_BIDIRECTIONAL : CUDNN_UNIDIRECTIONAL,
        CUDNN_LINEAR_INPUT, dtype_, CUDNN_DATA_FLOAT,
        // FMA: fp32 without TF32 tensor cores, comparable with the CPU backend; DEFAULT lets cuDNN use TF32,
        // and for bf16 data with fp32 math it is what PyTorch's bf16 RNN uses (cuDNN >= 9.13, PR 164411):
        // tensor cores stay allowed, while CUDNN_TENSOR_OP_MATH with bf16 data is refused by some versions.
        ctx_.math == MathMode::fp32 ? CUDNN_FMA_MATH : CUDNN_DEFAULT_MATH,
        shape_.input, shape_.hidden, shape_.out() /* projSize: hidden when there is no projection */, shape_.layers,
        dropout_.get(), CUDNN_RNN_PADDED_IO_DISABLED));
  }

  // cuDNN draws its masks from its own generator state (the CPU backend's masks differ anyway): it is
  // seeded once, from the first training step's seed, and then advances from call to call.
  void seed_dropout(uint64_t seed) {
    size_t bytes = 0;
    CUDNN_CHECK(cudnnDropoutGetStatesSize(ctx_.cudnn, &bytes));
    dropout_states_ = Buffer(backend_, bytes);
    CUDNN_CHECK(cudnnSetDropoutDescriptor(dropout_.get(), ctx_.cudnn, shape_.dropout, dropout_states_.data(), bytes,
                                          static_cast<unsigned long long>(seed)));
    set_rnn_descriptor();
    dropout_seeded_ = true;
  }

  void describe(BatchDescs& d, const Packing& packing) {
    const int B = packing.batch(), T = packing.steps();
    if (B < 1 || T != packing.lengths[0])
      throw Error(cat("CudnnLstm: inconsistent packing (", B, " sequences, ", T, " steps)"));
    for (int b = 0; b < B; ++b)
      if (packing.lengths[b] < 1 || (b > 0 && packing.lengths[b] > packing.lengths[b - 1]))
        throw Error(cat("CudnnLstm: sequence lengths must be non-increasing and >= 1 (sequence ", b, " has ",
                        packing.lengths[b], ")"));
    CUDNN_CHECK(cudnnSetRNNDataDescriptor(d.x.get(), dtype_, CUDNN_RNN_DATA_LAYOUT_SEQ_MAJOR_PACKED, T, B,
                                          shape_.input, packing.lengths.data(), nullptr));
    CUDNN_CHECK(cudnnSetRNNDataDescriptor(d.y.get(), dtype_, CUDNN_RNN_DATA_LAYOUT_SEQ_MAJOR_PACKED, T, B,
                                          static_cast<int>(out_), packing.lengths.data(), nullptr));
    for (auto [desc, width] : {std::pair{d.h.get(), shape_.out()}, std::pair{d.c.get(), shape_.hidden}}) {
      const int dims[3] = {shape_.layers * directions_, B, width};
      const int strides[3] = {B * width, width, 1};
      CUDNN_CHECK(cudnnSetTensorNdDescriptor(desc, dtype_, 3, dims, strides));
    }
    // The host lengths went into the descriptors; cuDNN also wants them in device memory.
    ensure(d.seq_lengths, backend_, static_cast<size_t>(B) * sizeof(int32_t));
    static_assert(sizeof(int) == sizeof(int32_t));
    backend_.upload(d.seq_lengths.data(), packing.lengths.data(), static_cast<size_t>(B) * sizeof(int32_t));
  }

  // Offsets of every gate matrix and bias, read from cuDNN on a scratch weight space (pseudo-layer
  // l * directions + d); verifies that each PyTorch tensor (four gates stacked) is one contiguous run, and
  // builds the slices in PyTorch's order (layer by layer, the forward direction first).
  void locate_params() {
    Buffer probe(backend_, weight_bytes_);
    const char* base = static_cast<const char*>(probe.data());
    TensorDesc mdesc, bdesc;
    const int64_t H = shape_.hidden, R = shape_.out(), P = shape_.proj, elems = weight_elems();
    auto numel = [](const TensorDesc& desc) {
      cudnnDataType_t type;
      int nb = 0, dims[8] = {0}, strides[8] = {0};
      CUDNN_CHECK(cudnnGetTensorNdDescriptor(desc.get(), 8, &type, &nb, dims, strides));
      int64_t n = 1;
      for (int i = 0; i < nb; ++i) n *= dims[i];
      return n;
    };
    for (int pseudo = 0; pseudo < shape_.layers * directions_; ++pseudo) {
      const int l = pseudo / directions_, dir = pseudo % directions_;
      const int64_t in = l == 0 ? shape_.input : out_;
      int64_t mat[8], bias[8];
      for (int id = 0; id < 8; ++id) {
        void *maddr = nullptr, *baddr = nullptr;
        CUDNN_CHECK(cudnnGetRNNWeightParams(ctx_.cudnn, rnn_.get(), pseudo, weight_bytes_, probe.data(), id,
                                            mdesc.get(), &maddr, bdesc.get(), &baddr));
        const int64_t want_mat = H * (id < 4 ? in : R);
        if (!maddr || !baddr || numel(mdesc) != want_mat || numel(bdesc) != H)
          throw Error(cat("cuDNN: unexpected LSTM parameter shapes in pseudo-layer ", pseudo, ", linLayerID ", id, " (matrix ",
                          numel(mdesc), " elements, want ", want_mat, "; bias ", numel(bdesc), ", want ", H, ")"));
        mat[id] = (static_cast<const char*>(maddr) - base) / static_cast<int64_t>(elem_);
        bias[id] = (static_cast<const char*>(baddr) - base) / static_cast<int64_t>(elem_);
      }
      auto contiguous = [&](const int64_t* off, int first, int64_t size) {
        for (int g = 1; g < 4; ++g)
          if (off[first + g] != off[first] + g * size) return false;
        return off[first] >= 0 && off[first] + 4 * size <= elems;
      };
      if (!contiguous(mat, 0, H * in) || !contiguous(mat, 4, H * R) || !contiguous(bias, 0, H) ||
          !contiguous(bias, 4, H))
        throw Error(cat("cuDNN ", cudnnGetVersion(), " does not place the four gate matrices of LSTM layer ", l,
                        " back to back in PyTorch's order i, f, g, o, so the PyTorch-named parameters cannot be "
                        "views of its weight space; this build needs canonical parameters by copy"));
      const std::string s = cat("_l", l, dir ? "_reverse" : "");
      params_.push_back({"weight_ih" + s, mat[0], {4 * H, in}});
      params_.push_back({"weight_hh" + s, mat[4], {4 * H, R}});
      params_.push_back({"bias_ih" + s, bias[0], {4 * H}});
      params_.push_back({"bias_hh" + s, bias[4], {4 * H}});
      if (P > 0) {
        // The recurrent projection: one P x H matrix, no bias (PyTorch's weight_hr, which has none either).
        void *maddr = nullptr, *baddr = nullptr;
        CUDNN_CHECK(cudnnGetRNNWeightParams(ctx_.cudnn, rnn_.get(), pseudo, weight_bytes_, probe.data(), 8,
                                            mdesc.get(), &maddr, bdesc.get(), &baddr));
        const int64_t at = maddr ? (static_cast<const char*>(maddr) - base) / static_cast<int64_t>(elem_) : -1;
        if (!maddr || baddr || numel(mdesc) != P * H || at < 0 || at + P * H > elems)
          throw Error(cat("cuDNN: unexpected LSTM projection in pseudo-layer ", pseudo, " (linLayerID 8: matrix ",
                          numel(mdesc), " elements, want ", P * H, baddr ? ", and a bias" : "", ")"));
        params_.push_back({"weight_hr" + s, at, {P, H}});
      }
    }
  }

  Backend& backend_;
  Context ctx_;
  LstmShape shape_;
  const bool bf16_;
  const cudnnDataType_t dtype_;  // of cuDNN's data, states and weight space
  const size_t elem_;            // bytes per value of those
  const int directions_;         // 2 when bidirectional
  const int64_t out_;            // width of y's rows: directions * R
  RnnDesc rnn_;
  DropoutDesc dropout_;
  bool inter_layer_dropout_ = false, dropout_seeded_ = false;
  size_t weight_bytes_ = 0;
  std::vector<ParamSlice> params_;
  BatchDescs train_, infer_;
  // Workspace shared by every call (stream-ordered); reserve space of the last training forward.
  Buffer workspace_, reserve_, dropout_states_, dy_zero_, dx_scratch_;
  // bf16: the weights of the last forward, the weight gradient, and the backward pass's data.
  Buffer weights16_, dweights16_, dy16_, dhn16_, dcn16_, dx16_, dh0_16_, dc0_16_;
  size_t workspace_bytes_ = 0, reserve_bytes_ = 0;
  struct Saved {
    const void *x = nullptr, *y = nullptr, *h0 = nullptr, *c0 = nullptr;  // as cuDNN saw them
    int64_t rows = 0, hstate = 0, cstate = 0;
    bool valid = false;
  } saved_;
};

}  // namespace

std::unique_ptr<Lstm> make_cudnn_lstm(Backend& backend, const Context& context, const LstmShape& shape) {
  return std::make_unique<CudnnLstm>(backend, context, shape);
}

}  // namespace rnn_dist::cuda

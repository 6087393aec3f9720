// GPU backend against the CPU backend (the oracle), through the Backend interface only, so this file builds
// in every configuration. Without a usable GPU every test is skipped visibly with the reason. With one:
// each kernel on random inputs (embedding, linear, cross-entropy loss and gradient, dropout masks bit for
// bit, sum of squares, bfloat16 conversions, SGD/Adam/AdamW updates), the cuDNN LSTM against the CPU LSTM
// on a packed batch of unequal lengths with two layers and initial/final states (weights copied by PyTorch
// name, which tests the weight mapping; also bidirectional; tied embeddings and the adaptive softmax), cuDNN's inter-layer dropout (its own masks:
// their rate), the pooling kernels, the whole model's loss, gradients and final state (also carried in
// place in device memory, as stream mode does; also bidirectional classifiers and taggers; also with the
// loss over many logits blocks), a few SGD steps, refusal of a local rank without a GPU, and NCCL on one
// rank: every collective, bfloat16 against the CPU's rounding, the flat and hierarchical sums, and a wait
// that polls an unfinished collective followed by a kernel launch that must succeed. Every output the GPU
// writes starts as NaN (or a sentinel), so that one it leaves unwritten fails. fp32 without TF32: relative
// tolerance ~1e-4.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <limits>
#include <map>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "rnn_dist/backends/make_backend.h"
#include "rnn_dist/cuda/cuda_device.h"
#include "rnn_dist/dist/communicator.h"
#include "rnn_dist/nn/backend.h"
#include "rnn_dist/nn/model.h"
#include "rnn_dist/nn/optimizer.h"
#include "rnn_dist/nn/sparse_rows.h"
#include "rnn_dist/train/checkpoint.h"
#include "rnn_dist/util/bfloat16.h"
#include "rnn_dist/util/error.h"
#if defined(RNN_DIST_HAVE_CUDA)
#include "rnn_dist/cuda/nccl_communicator.h"
#endif

namespace rnn_dist {
namespace {

constexpr double kRtol = 1e-4;

// A host vector mirrored in a Buffer of one backend.
template <class T>
class DeviceVector {
 public:
  DeviceVector(Backend& backend, const std::vector<T>& host)
      : backend_(&backend), n_(host.size()), buf_(backend, std::max<size_t>(1, host.size()) * sizeof(T)) {
    if (n_) backend.upload(buf_.data(), host.data(), n_ * sizeof(T));
  }
  T* get() const { return static_cast<T*>(buf_.data()); }
  std::vector<T> host() const {
    std::vector<T> h(n_);
    if (n_) backend_->download(h.data(), buf_.data(), n_ * sizeof(T));
    return h;
  }

 private:
  Backend* backend_;
  size_t n_;
  Buffer buf_;
};

std::vector<float> random_floats(size_t n, uint32_t seed, float scale = 1.0f) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(-scale, scale);
  std::vector<float> v(n);
  for (float& x : v) x = u(rng);
  return v;
}

// What every GPU output starts as: a kernel that does not write it leaves NaN, which no comparison accepts.
std::vector<float> nans(size_t n) { return std::vector<float>(n, std::numeric_limits<float>::quiet_NaN()); }
constexpr int32_t kSentinel = -123456789;

// The sum a cross_entropy call adds into a device double, read back.
double loss_of(Backend& b, const float* logits, int64_t rows, int vocab, const int32_t* targets, float* dlogits,
               float scale) {
  Buffer sum(b, sizeof(double));
  auto* d = static_cast<double*>(sum.data());
  b.zero(reinterpret_cast<float*>(d), 2);
  b.cross_entropy(logits, rows, vocab, targets, dlogits, scale, d);
  double v = 0;
  b.start_read(d, 1);
  b.finish_read(&v);
  return v;
}

std::vector<int32_t> random_ids(size_t n, int32_t below, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int32_t> u(0, below - 1);
  std::vector<int32_t> v(n);
  for (int32_t& x : v) x = u(rng);
  return v;
}

// |got - want| <= rtol * (|want| + max|want|) elementwise: relative, with an absolute floor at the scale of
// the data (sums in another order differ by about rounding times the magnitude of their terms).
void expect_close(const std::vector<float>& got, const std::vector<float>& want, const std::string& what,
                  double rtol = kRtol) {
  ASSERT_EQ(got.size(), want.size()) << what;
  double scale = 0;
  for (float w : want) scale = std::max(scale, std::fabs(double{w}));
  size_t bad = 0, first = 0;
  double worst = 0;
  for (size_t i = 0; i < want.size(); ++i) {
    const double err = std::fabs(double{got[i]} - want[i]), tol = rtol * (std::fabs(double{want[i]}) + scale);
    if (!(err <= tol)) {
      if (bad++ == 0) first = i;
    }
    worst = std::max(worst, err / std::max(scale, 1e-30));
  }
  EXPECT_EQ(bad, 0u) << what << ": " << bad << " of " << want.size() << " elements differ; first at " << first
                     << ": got " << got[first] << ", want " << want[first] << " (max error / scale " << worst << ")";
}

class CudaBackendTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (cuda_device_count() == 0)
      GTEST_SKIP() << "no GPU: cuda_device_count() is 0 (GPU runtime: " << gpu_runtime_versions() << ")";
    gpu_ = make_backend(DeviceType::cuda, 0, 1);
    cpu_ = make_backend(DeviceType::cpu, 0, 2);
  }
  std::unique_ptr<Backend> cpu_, gpu_;
};

TEST_F(CudaBackendTest, PlacementAndMemory) {
  EXPECT_EQ(gpu_->device(), (Device{DeviceType::cuda, 0}));
  EXPECT_NE(gpu_->device_name().find("cuda:0"), std::string::npos) << gpu_->device_name();
  const std::vector<float> host = random_floats(1000, 1);
  DeviceVector<float> a(*gpu_, host), b(*gpu_, std::vector<float>(1000, 0.0f));
  gpu_->copy(b.get(), a.get(), 1000 * sizeof(float));
  EXPECT_EQ(b.host(), host);
  gpu_->zero(b.get() + 10, 20);
  std::vector<float> want = host;
  std::fill(want.begin() + 10, want.begin() + 30, 0.0f);
  EXPECT_EQ(b.host(), want);
  Tensor t(*gpu_, {3, 4});
  EXPECT_EQ(t.device(), gpu_->device());
}

TEST_F(CudaBackendTest, EmbeddingForwardAndBackward) {
  const int V = 13, dim = 7;
  const int64_t rows = 50;
  const auto ids = random_ids(rows, V, 2);  // 50 ids over 13 entries: many repeats
  const auto table = random_floats(V * dim, 3), dout = random_floats(rows * dim, 4), dtable0 = random_floats(V * dim, 5);
  std::vector<float> out_cpu(rows * dim), dtable_cpu = dtable0;
  cpu_->embedding_forward(ids.data(), rows, table.data(), dim, out_cpu.data());
  cpu_->embedding_backward(ids.data(), rows, dout.data(), dim, dtable_cpu.data());

  DeviceVector<int32_t> gids(*gpu_, ids);
  DeviceVector<float> gtable(*gpu_, table), gout(*gpu_, nans(rows * dim)), gdout(*gpu_, dout),
      gdtable(*gpu_, dtable0);
  gpu_->embedding_forward(gids.get(), rows, gtable.get(), dim, gout.get());
  gpu_->embedding_backward(gids.get(), rows, gdout.get(), dim, gdtable.get());
  EXPECT_EQ(gout.host(), out_cpu);
  expect_close(gdtable.host(), dtable_cpu, "dtable", 1e-6);
}

TEST_F(CudaBackendTest, LinearForwardAndBackward) {
  const int64_t rows = 37;
  const int in = 19, out = 23;
  const auto x = random_floats(rows * in, 6), w = random_floats(out * in, 7), b = random_floats(out, 8),
             dy = random_floats(rows * out, 9), dw0 = random_floats(out * in, 10), db0 = random_floats(out, 11);
  std::vector<float> y(rows * out), dx(rows * in), dw = dw0, db = db0;
  cpu_->linear_forward(x.data(), rows, in, w.data(), b.data(), out, y.data());
  cpu_->linear_backward(x.data(), rows, in, w.data(), out, dy.data(), dx.data(), dw.data(), db.data());

  DeviceVector<float> gx(*gpu_, x), gw(*gpu_, w), gb(*gpu_, b), gy(*gpu_, nans(rows * out)), gdy(*gpu_, dy),
      gdx(*gpu_, nans(rows * in)), gdw(*gpu_, dw0), gdb(*gpu_, db0);
  gpu_->linear_forward(gx.get(), rows, in, gw.get(), gb.get(), out, gy.get());
  gpu_->linear_backward(gx.get(), rows, in, gw.get(), out, gdy.get(), gdx.get(), gdw.get(), gdb.get());
  expect_close(gy.host(), y, "y");
  expect_close(gdx.host(), dx, "dx (overwritten)");
  expect_close(gdw.host(), dw, "dw (accumulated)");
  expect_close(gdb.host(), db, "db (accumulated)");
}

TEST_F(CudaBackendTest, CrossEntropyLossAndGradient) {
  for (const int vocab : {57, 1000}) {
    SCOPED_TRACE(vocab);
    const int64_t rows = 29;
    const auto logits = random_floats(rows * vocab, 12, 4.0f);
    const auto targets = random_ids(rows, vocab, 13);
    const float scale = 0.37f;
    std::vector<float> d(rows * vocab);
    const double loss = loss_of(*cpu_, logits.data(), rows, vocab, targets.data(), d.data(), scale);

    DeviceVector<float> gl(*gpu_, logits), gd(*gpu_, nans(rows * vocab));
    DeviceVector<int32_t> gt(*gpu_, targets);
    EXPECT_NEAR(loss_of(*gpu_, gl.get(), rows, vocab, gt.get(), nullptr, scale), loss, 1e-5 * loss);
    EXPECT_NEAR(loss_of(*gpu_, gl.get(), rows, vocab, gt.get(), gd.get(), scale), loss, 1e-5 * loss);
    expect_close(gd.host(), d, "dlogits");
    // In place, as the model calls it.
    EXPECT_NEAR(loss_of(*gpu_, gl.get(), rows, vocab, gt.get(), gl.get(), scale), loss, 1e-5 * loss);
    expect_close(gl.host(), d, "dlogits in place");
  }
  // Calls add into the sum on the device, as the blocks of a batch do: two halves make the whole.
  const int64_t rows = 40;
  const int vocab = 33;
  const auto logits = random_floats(rows * vocab, 18, 3.0f);
  const auto targets = random_ids(rows, vocab, 19);
  const double whole = loss_of(*cpu_, logits.data(), rows, vocab, targets.data(), nullptr, 1.0f);
  DeviceVector<float> gl(*gpu_, logits);
  DeviceVector<int32_t> gt(*gpu_, targets);
  DeviceVector<double> sum(*gpu_, std::vector<double>{0.0});
  gpu_->cross_entropy(gl.get(), 15, vocab, gt.get(), nullptr, 1.0f, sum.get());
  gpu_->cross_entropy(gl.get() + 15 * vocab, rows - 15, vocab, gt.get() + 15, nullptr, 1.0f, sum.get());
  double got = 0;
  gpu_->start_read(sum.get(), 1);
  gpu_->finish_read(&got);
  EXPECT_NEAR(got, whole, 1e-6 * whole);

  // A target outside the vocabulary is reported at the read, with its row and value, and only once.
  DeviceVector<int32_t> bad(*gpu_, std::vector<int32_t>{1, 5, 2});
  try {
    loss_of(*gpu_, gl.get(), 3, 5, bad.get(), nullptr, 1.0f);
    ADD_FAILURE() << "no Error for a target outside the vocabulary";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("target 5 of row 1 is outside the vocabulary of 5"), std::string::npos)
        << e.what();
  }
  EXPECT_NO_THROW(loss_of(*gpu_, gl.get(), rows, vocab, gt.get(), nullptr, 1.0f));
}

TEST_F(CudaBackendTest, DropoutMaskIsTheCpuMask) {
  const int64_t n = 100003;
  const auto x = random_floats(n, 15);
  for (const float p : {0.0f, 0.3f, 0.5f}) {
    SCOPED_TRACE(p);
    std::vector<float> y(n);
    cpu_->dropout(x.data(), n, p, 987654321ull, y.data());
    DeviceVector<float> gx(*gpu_, x), gy(*gpu_, nans(n));
    gpu_->dropout(gx.get(), n, p, 987654321ull, gy.get());
    EXPECT_EQ(gy.host(), y);  // bit for bit
    gpu_->dropout(gx.get(), n, p, 987654321ull, gx.get());  // in place, as the backward pass calls it
    EXPECT_EQ(gx.host(), y);
  }
}

TEST_F(CudaBackendTest, SumSquaresAndScale) {
  const int64_t n = 300001;
  const auto x = random_floats(n, 16);
  DeviceVector<float> gx(*gpu_, x);
  const double want = cpu_->sum_squares(x.data(), n);
  EXPECT_NEAR(gpu_->sum_squares(gx.get(), n), want, 1e-9 * want);
  EXPECT_EQ(gpu_->sum_squares(gx.get(), 0), 0.0);
  // Into device memory, read back later as the training step does.
  DeviceVector<double> out(*gpu_, std::vector<double>{std::numeric_limits<double>::quiet_NaN()});
  gpu_->sum_squares(gx.get(), n, out.get());
  double got = 0;
  gpu_->start_read(out.get(), 1);
  EXPECT_THROW(gpu_->sum_squares(gx.get(), n), Error) << "a read inside another read";
  gpu_->finish_read(&got);
  EXPECT_NEAR(got, want, 1e-9 * want);
  EXPECT_THROW(gpu_->finish_read(&got), Error) << "finish_read without start_read";
  std::vector<float> xs = x;
  cpu_->scale(xs.data(), n, -0.25f);
  gpu_->scale(gx.get(), n, -0.25f);
  EXPECT_EQ(gx.host(), xs);
}

TEST_F(CudaBackendTest, OptimizerUpdatesMatchTheCpu) {
  const int64_t n = 4099;
  const auto p0 = random_floats(n, 17);
  for (const std::string kind : {"sgd", "adam", "adamw"}) {
    SCOPED_TRACE(kind);
    std::vector<float> p = p0, a(n, 0.0f), b(n, 0.0f);
    DeviceVector<float> gp(*gpu_, p0), ga(*gpu_, a), gb(*gpu_, b);
    for (int step = 1; step <= 3; ++step) {
      const auto g = random_floats(n, 100 + step);
      DeviceVector<float> gg(*gpu_, g);
      if (kind == "sgd") {
        cpu_->sgd_update(p.data(), g.data(), a.data(), n, 0.1f, 0.9f, 0.01f);
        gpu_->sgd_update(gp.get(), gg.get(), ga.get(), n, 0.1f, 0.9f, 0.01f);
      } else {
        const bool decoupled = kind == "adamw";
        cpu_->adam_update(p.data(), g.data(), a.data(), b.data(), n, 1e-2f, 0.9f, 0.999f, 1e-8f, 0.05f, decoupled, step);
        gpu_->adam_update(gp.get(), gg.get(), ga.get(), gb.get(), n, 1e-2f, 0.9f, 0.999f, 1e-8f, 0.05f, decoupled,
                          step);
      }
    }
    // The kernels repeat the CPU's operations in order without fused multiply-adds.
    expect_close(gp.host(), p, "parameters", 1e-6);
    expect_close(ga.host(), a, "first state", 1e-6);
    if (kind != "sgd") expect_close(gb.host(), b, "second state", 1e-6);
  }
}

// --sparse-embedding's kernels: SparseRows on the GPU (its index arrays uploaded, its rows summed without
// atomics) is the CPU's bitwise, over two calls with repeats and placeholders; the row updates equal the
// CPU's on the touched rows and leave the others as they were.
TEST_F(CudaBackendTest, SparseRowsAndRowUpdatesMatchTheCpu) {
  const int64_t V = 41, rows = 60;
  const int dim = 9;
  SparseRows cpu_rows(*cpu_, V, dim), gpu_rows(*gpu_, V, dim);
  for (int call = 0; call < 2; ++call) {
    auto ids = random_ids(rows, static_cast<int>(V), 30 + call);
    ids[5] = static_cast<int32_t>(V);  // a placeholder
    const auto dout = random_floats(rows * dim, 40 + call);
    DeviceVector<float> gdout(*gpu_, dout);
    cpu_rows.add(ids.data(), rows, dout.data(), true);
    gpu_rows.add(ids.data(), rows, gdout.get(), true);
  }
  ASSERT_EQ(gpu_rows.ids(), cpu_rows.ids());
  const int64_t k = cpu_rows.size();
  std::vector<float> got(k * dim);
  gpu_->download(got.data(), gpu_rows.rows(), got.size() * sizeof(float));
  EXPECT_EQ(got, std::vector<float>(cpu_rows.rows(), cpu_rows.rows() + k * dim));
  const auto p0 = random_floats(V * dim, 50), g = std::vector<float>(cpu_rows.rows(), cpu_rows.rows() + k * dim);
  for (const std::string kind : {"sgd", "adam", "adamw"}) {
    SCOPED_TRACE(kind);
    std::vector<float> p = p0, a(V * dim, 0.5f), b(V * dim, 0.25f);
    DeviceVector<float> gp(*gpu_, p0), ga(*gpu_, a), gb(*gpu_, b), gg(*gpu_, g);
    for (int step = 1; step <= 2; ++step) {
      if (kind == "sgd") {
        cpu_->sgd_update_rows(p.data(), g.data(), a.data(), cpu_rows.device_ids(), k, dim, 0.1f, 0.9f, 0.01f);
        gpu_->sgd_update_rows(gp.get(), gg.get(), ga.get(), gpu_rows.device_ids(), k, dim, 0.1f, 0.9f, 0.01f);
      } else {
        const bool decoupled = kind == "adamw";
        cpu_->adam_update_rows(p.data(), g.data(), a.data(), b.data(), cpu_rows.device_ids(), k, dim, 1e-2f, 0.9f,
                               0.999f, 1e-8f, 0.05f, decoupled, step);
        gpu_->adam_update_rows(gp.get(), gg.get(), ga.get(), gb.get(), gpu_rows.device_ids(), k, dim, 1e-2f, 0.9f,
                               0.999f, 1e-8f, 0.05f, decoupled, step);
      }
    }
    expect_close(gp.host(), p, "parameters", 1e-6);
    expect_close(ga.host(), a, "first state", 1e-6);
    if (kind != "sgd") expect_close(gb.host(), b, "second state", 1e-6);
    int untouched = 0;
    for (int64_t i = 0; i < V * dim; ++i) untouched += p[i] == p0[i];
    EXPECT_EQ(untouched, (V - k) * dim) << "the CPU's update changed rows outside the touched ones";
  }
}

// Values per PyTorch name, written into each implementation's own layout.
std::vector<float> by_name(const Lstm& lstm, const std::map<std::string, std::vector<float>>& values) {
  std::vector<float> w(lstm.weight_elems(), 0.0f);
  for (const ParamSlice& s : lstm.canonical_params()) {
    const auto& v = values.at(s.name);
    EXPECT_EQ(static_cast<int64_t>(v.size()), numel_of(s.shape)) << s.name;
    std::copy(v.begin(), v.end(), w.begin() + s.offset);
  }
  return w;
}

std::vector<float> slice_of(const std::vector<float>& w, const ParamSlice& s) {
  return {w.begin() + s.offset, w.begin() + s.offset + numel_of(s.shape)};
}

// The cuDNN LSTM of `shape` against the CPU's, on a packed batch of unequal lengths with initial and final
// states, forward, backward and inference.
void expect_lstm_matches(Backend& cpu, Backend& gpu, const LstmShape& shape) {
  auto cl = cpu.make_lstm(shape);
  auto gl = gpu.make_lstm(shape);
  EXPECT_GE(gl->weight_elems(), cl->weight_elems());

  // Same PyTorch names and shapes in both; random values per name.
  const auto cparams = cl->canonical_params(), gparams = gl->canonical_params();
  ASSERT_EQ(cparams.size(), gparams.size());
  std::map<std::string, std::vector<float>> values;
  for (size_t i = 0; i < cparams.size(); ++i) {
    EXPECT_EQ(gparams[i].name, cparams[i].name);
    EXPECT_EQ(gparams[i].shape, cparams[i].shape) << cparams[i].name;
    values[cparams[i].name] = random_floats(numel_of(cparams[i].shape), 200 + static_cast<uint32_t>(i), 0.5f);
  }
  const std::vector<float> wc = by_name(*cl, values), wg = by_name(*gl, values);

  const Packing packing = Packing::from_lengths(std::vector<int>{6, 4, 4, 2, 1});
  // h and y are R = shape.out() wide (the projection's width, else H), c is H wide.
  const int64_t D = shape.bidirectional ? 2 : 1, Y = D * shape.out();
  const int64_t rows = packing.rows(), state = int64_t{shape.layers} * D * packing.batch() * shape.out(),
                cstate = int64_t{shape.layers} * D * packing.batch() * shape.hidden;
  const auto x = random_floats(rows * shape.input, 20), h0 = random_floats(state, 21), c0 = random_floats(cstate, 22),
             dy = random_floats(rows * Y, 23), dhn = random_floats(state, 24), dcn = random_floats(cstate, 25);

  std::vector<float> y(rows * Y), hn(state), cn(cstate), dx(rows * shape.input), dh0(state), dc0(cstate),
      dw(cl->weight_elems(), 0.0f);
  cl->forward(wc.data(), packing, x.data(), h0.data(), c0.data(), y.data(), hn.data(), cn.data(), true, 0);
  cl->backward(wc.data(), dy.data(), dhn.data(), dcn.data(), dx.data(), dh0.data(), dc0.data(), dw.data());

  DeviceVector<float> gw(gpu, wg), gx(gpu, x), gh0(gpu, h0), gc0(gpu, c0), gy(gpu, nans(y.size())),
      ghn(gpu, nans(hn.size())), gcn(gpu, nans(cn.size())), gdy(gpu, dy), gdhn(gpu, dhn), gdcn(gpu, dcn),
      gdx(gpu, nans(dx.size())), gdh0(gpu, nans(dh0.size())), gdc0(gpu, nans(dc0.size())),
      gdw(gpu, std::vector<float>(gl->weight_elems(), 0.0f));
  gl->forward(gw.get(), packing, gx.get(), gh0.get(), gc0.get(), gy.get(), ghn.get(), gcn.get(), true, 0);
  gl->backward(gw.get(), gdy.get(), gdhn.get(), gdcn.get(), gdx.get(), gdh0.get(), gdc0.get(), gdw.get());
  expect_close(gy.host(), y, "y");
  expect_close(ghn.host(), hn, "hn");
  expect_close(gcn.host(), cn, "cn");
  expect_close(gdx.host(), dx, "dx");
  expect_close(gdh0.host(), dh0, "dh0");
  expect_close(gdc0.host(), dc0, "dc0");
  const auto gdw_host = gdw.host();
  for (size_t i = 0; i < cparams.size(); ++i)
    expect_close(slice_of(gdw_host, gparams[i]), slice_of(dw, cparams[i]), "d" + cparams[i].name);

  // Inference keeps nothing for backward and gives the same outputs; zero initial states by null.
  std::vector<float> y0(rows * Y), hn0(state);
  cl->forward(wc.data(), packing, x.data(), nullptr, nullptr, y0.data(), hn0.data(), nullptr, false, 0);
  DeviceVector<float> gy0(gpu, nans(y0.size())), ghn0(gpu, nans(hn0.size()));
  gl->forward(gw.get(), packing, gx.get(), nullptr, nullptr, gy0.get(), ghn0.get(), nullptr, false, 0);
  expect_close(gy0.host(), y0, "y (inference)");
  expect_close(ghn0.host(), hn0, "hn (inference)");
}

TEST_F(CudaBackendTest, CudnnLstmMatchesCpuLstm) { expect_lstm_matches(*cpu_, *gpu_, {5, 8, 2, 0.0f}); }

// CUDNN_BIDIRECTIONAL: the *_reverse weights located by pseudo-layer, layer 1 reading both directions of
// layer 0, each sequence's reverse pass from its own last token, states (layers * 2) x B x H.
TEST_F(CudaBackendTest, BidirectionalCudnnLstmMatchesCpuLstm) { expect_lstm_matches(*cpu_, *gpu_, {5, 8, 2, 0.0f, true}); }

// --proj-size: cuDNN's recurrent projection (projSize, its matrix linLayerID 8 as weight_hr_l{k}), h and y
// P wide, c H wide; one and two directions.
TEST_F(CudaBackendTest, ProjectedCudnnLstmMatchesCpuLstm) {
  expect_lstm_matches(*cpu_, *gpu_, {5, 8, 2, 0.0f, false, 3});
  expect_lstm_matches(*cpu_, *gpu_, {5, 8, 2, 0.0f, true, 3});
}

// A classifier's pooling: every kind and both direction counts, forward and backward, bit for bit where
// no sum is involved (last, max) and to rounding for mean.
TEST_F(CudaBackendTest, PoolingMatchesTheCpu) {
  const Packing packing = Packing::from_lengths(std::vector<int>{7, 5, 5, 2, 1});
  const int64_t rows = packing.rows(), B = packing.batch();
  for (int D : {1, 2}) {
    const int dim = 6 * D;
    const auto y = random_floats(rows * dim, 60 + D), dout = random_floats(B * dim, 70 + D);
    for (Pool pool : {Pool::last, Pool::mean, Pool::max}) {
      const std::string what = cat(pool_name(pool), ", ", D, " direction(s)");
      std::vector<float> out(B * dim), dy(rows * dim);
      std::vector<int32_t> argmax(B * dim);
      cpu_->pool_forward(y.data(), packing, dim, D, pool, out.data(), argmax.data());
      cpu_->pool_backward(dout.data(), packing, dim, D, pool, argmax.data(), dy.data());
      DeviceVector<float> gy(*gpu_, y), gout(*gpu_, nans(out.size())), gdout(*gpu_, dout), gdy(*gpu_, nans(dy.size()));
      DeviceVector<int32_t> gargmax(*gpu_, std::vector<int32_t>(argmax.size(), kSentinel));
      gpu_->pool_forward(gy.get(), packing, dim, D, pool, gout.get(), gargmax.get());
      gpu_->pool_backward(gdout.get(), packing, dim, D, pool, gargmax.get(), gdy.get());
      expect_close(gout.host(), out, what + " forward");
      expect_close(gdy.host(), dy, what + " backward");
      if (pool == Pool::max) {
        EXPECT_EQ(gargmax.host(), argmax) << what;
      }
    }
  }
}

// Max pooling by hand on the GPU too (issue 27 #6): the maximum at a sequence's last row, a tie taking the
// first row, the gradient to that row alone (the data of test_cpu_kernels' MaxPoolingByHand).
TEST_F(CudaBackendTest, MaxPoolingByHand) {
  const Packing packing = Packing::from_lengths(std::vector<int>{3, 2});
  const int dim = 3;
  const double rows[3][2][3] = {{{1, 5, 9}, {0, 4, -1}}, {{2, 5, 3}, {7, 4, -2}}, {{8, 1, 2}, {0, 0, 0}}};
  std::vector<float> y(packing.rows() * dim, 0.0f);
  for (int t = 0; t < 3; ++t)
    for (int b = 0; b < packing.batch(); ++b)
      if (t < packing.lengths[b])
        for (int k = 0; k < dim; ++k) y[packing.row(t, b) * dim + k] = static_cast<float>(rows[t][b][k]);
  DeviceVector<float> gy(*gpu_, y), gout(*gpu_, nans(2 * dim)), gdout(*gpu_, {1, 2, 3, 4, 5, 6}), gdy(*gpu_, nans(y.size()));
  DeviceVector<int32_t> gargmax(*gpu_, std::vector<int32_t>(2 * dim, kSentinel));
  gpu_->pool_forward(gy.get(), packing, dim, 1, Pool::max, gout.get(), gargmax.get());
  gpu_->pool_backward(gdout.get(), packing, dim, 1, Pool::max, gargmax.get(), gdy.get());
  EXPECT_EQ(gout.host(), (std::vector<float>{8, 5, 9, 7, 4, -1}));
  EXPECT_EQ(gargmax.host(), (std::vector<int32_t>{2, 0, 0, 1, 0, 0}));
  std::vector<float> want(y.size(), 0.0f);
  want[packing.row(2, 0) * dim + 0] = 1, want[packing.row(0, 0) * dim + 1] = 2, want[packing.row(0, 0) * dim + 2] = 3;
  want[packing.row(1, 1) * dim + 0] = 4, want[packing.row(0, 1) * dim + 1] = 5, want[packing.row(0, 1) * dim + 2] = 6;
  EXPECT_EQ(gdy.host(), want);
}

ModelConfig model_config() {
  ModelConfig c;
  c.vocab = 11;  // 11 x 6 embedding floats: the LSTM region starts unaligned, which the GPU LSTM must handle
  c.embed = 6;
  c.hidden = 8;
  c.layers = 2;
  return c;
}

// Random sequences of the given lengths for the config's task: a language model's, or framed ones with a
// random label per sequence or tag per token.
Batch random_batch(const ModelConfig& config, const std::vector<int64_t>& lengths, uint32_t seed) {
  int64_t total = 0;
  for (int64_t l : lengths) total += l;
  std::vector<int32_t> ids = random_ids(total, static_cast<int32_t>(config.vocab), seed);
  if (config.task == Task::lm) return make_batch(ids, lengths);
  const size_t n = config.task == Task::classify ? lengths.size() : ids.size();
  return make_batch(config.task, ids, lengths, random_ids(n, static_cast<int32_t>(config.classes), seed + 1));
}

std::map<std::string, std::vector<float>> named(const Model& m, const std::vector<float>& flat) {
  std::map<std::string, std::vector<float>> out;
  for (const ParamSlice& s : m.param_slices()) out[s.name] = slice_of(flat, s);
  return out;
}

std::vector<float> grads_of(Model& m) {
  std::vector<float> g(m.num_params());
  m.backend().download(g.data(), m.grads().data(), g.size() * sizeof(float));
  return g;
}

// The same model (init 42) on the CPU and on a GPU backend, a batch, and the same initial state in each
// backend's own memory, as the model takes it.
struct CpuGpuPair {
  // gpu_logits_block > 0: the GPU model computes its loss in blocks of that many logits.
  CpuGpuPair(Backend& cpu, Backend& gpu, uint32_t seed, const ModelConfig& c = model_config(),
             int64_t gpu_logits_block = 0)
      : config(c),
        mc(cpu, config),
        mg(gpu, config, gpu_logits_block),
        batch(random_batch(config, {9, 7, 7, 4, 3}, seed)),
        scale(1.0f / static_cast<float>(batch.units())),
        h0(random_floats(state_elems(), seed + 1)),
        c0(random_floats(state_elems(), seed + 2)),
        h0_c(cpu, h0), c0_c(cpu, c0), hn_c(cpu, zeros()), cn_c(cpu, zeros()),
        h0_g(gpu, h0), c0_g(gpu, c0), hn_g(gpu, nans(state_elems())), cn_g(gpu, nans(state_elems())) {
    mc.init(42);
    mg.init(42);
  }
  size_t state_elems() const {
    return static_cast<size_t>(config.layers) * config.directions() * batch.packing.batch() * config.hidden;
  }
  std::vector<float> zeros() const { return std::vector<float>(state_elems(), 0.0f); }

  // One training pass from the initial state, then an evaluation: the losses within loss_rtol, the final
  // states and every gradient within rtol (expect_close). Returns the CPU's training loss.
  double expect_step_matches(double loss_rtol, double rtol, const std::string& what) {
    const double lc = mc.forward_backward(batch, scale, 7, h0_c.get(), c0_c.get(), hn_c.get(), cn_c.get());
    const double lg = mg.forward_backward(batch, scale, 7, h0_g.get(), c0_g.get(), hn_g.get(), cn_g.get());
    EXPECT_NEAR(lg, lc, loss_rtol * std::fabs(lc)) << what;
    expect_close(hn_g.host(), hn_c.host(), what + " hn", rtol);
    expect_close(cn_g.host(), cn_c.host(), what + " cn", rtol);
    const auto gc = named(mc, grads_of(mc)), gg = named(mg, grads_of(mg));
    for (const auto& [name, v] : gc) expect_close(gg.at(name), v, what + " grad " + name, rtol);
    EXPECT_NEAR(mg.evaluate(batch), mc.evaluate(batch), loss_rtol * std::fabs(lc)) << what;
    return lc;
  }

  ModelConfig config;
  Model mc, mg;
  Batch batch;
  float scale;
  std::vector<float> h0, c0;
  DeviceVector<float> h0_c, c0_c, hn_c, cn_c, h0_g, c0_g, hn_g, cn_g;
};

TEST_F(CudaBackendTest, ModelLossAndGradientsMatchTheCpu) {
  CpuGpuPair p(*cpu_, *gpu_, 30);
  // init draws by name in the same order, so both hold the same values.
  const auto pc = named(p.mc, p.mc.download_params()), pg = named(p.mg, p.mg.download_params());
  ASSERT_EQ(pc.size(), pg.size());
  for (const auto& [name, v] : pc) EXPECT_EQ(pg.at(name), v) << name;
  p.expect_step_matches(kRtol, kRtol, "fp32");

  // The state carried in place over two training steps and an evaluation, as stream mode does: one buffer
  // is the initial and the final state (cuDNN reads a copy of hx for its backward pass).
  for (int k = 0; k < 3; ++k) {
    auto pass = [&](Model& m, float* h, float* c) {
      return k < 2 ? m.forward_backward(p.batch, p.scale, 8 + k, h, c, h, c) : m.evaluate(p.batch, h, c, h, c);
    };
    const double ec = pass(p.mc, p.h0_c.get(), p.c0_c.get()), eg = pass(p.mg, p.h0_g.get(), p.c0_g.get());
    EXPECT_NEAR(eg, ec, kRtol * std::fabs(ec)) << "pass " << k << " with the state carried in place";
  }
  expect_close(p.h0_g.host(), p.h0_c.host(), "h carried in place");
  expect_close(p.c0_g.host(), p.c0_c.host(), "c carried in place");
}

// Bidirectional classifiers (every pooling) and taggers: the same loss, gradients and final states as on
// the CPU.
TEST_F(CudaBackendTest, ClassifierAndTaggerMatchTheCpu) {
  for (Task task : {Task::classify, Task::tag}) {
    for (Pool pool : {Pool::last, Pool::mean, Pool::max}) {
      if (task == Task::tag && pool != Pool::last) continue;
      ModelConfig c = model_config();
      c.task = task;
      c.classes = 5;
      c.bidirectional = true;
      c.pool = pool;
      CpuGpuPair(*cpu_, *gpu_, 35, c).expect_step_matches(kRtol, kRtol, cat(task_name(task), " pool ", pool_name(pool)));
    }
  }
}

// Issue 28's heads on the GPU through the same kernels as everything else (a gather and a scatter-add by
// the embedding's kernels, linear layers without a bias): tied embeddings, and the adaptive softmax with
// targets in every cluster; the same loss and gradients as on the CPU; and a projected LSTM under the
// adaptive softmax.
TEST_F(CudaBackendTest, TiedAndAdaptiveHeadsMatchTheCpu) {
  ModelConfig tied = model_config();
  tied.embed = tied.hidden;
  tied.tie_embeddings = true;
  CpuGpuPair(*cpu_, *gpu_, 36, tied).expect_step_matches(kRtol, kRtol, "tied embeddings");
  ModelConfig adaptive = model_config();
  adaptive.cutoffs = {3, 7};
  adaptive.div_value = 2;
  CpuGpuPair(*cpu_, *gpu_, 37, adaptive).expect_step_matches(kRtol, kRtol, "adaptive softmax");
  ModelConfig proj = adaptive;
  proj.proj = 4;
  CpuGpuPair(*cpu_, *gpu_, 38, proj).expect_step_matches(kRtol, kRtol, "projection with the adaptive softmax");
}

// --precision tf32: matrix products round their inputs to a 10-bit mantissa, so the model agrees with the
// CPU to about 1e-3 relative instead of float rounding.
TEST_F(CudaBackendTest, Tf32ModelTracksTheCpu) {
  auto tf32 = make_backend(DeviceType::cuda, 0, 1, MathMode::tf32);
  CpuGpuPair(*cpu_, *tf32, 33).expect_step_matches(1e-2, 3e-2, "tf32");
}

// --precision bf16: the LSTM on cuDNN's bf16 data and the output layer's GEMMs on bf16 inputs, both with
// fp32 accumulation, against the CPU's fp32 (8-bit mantissas: about 1e-2 relative). The fp32 master
// weights and gradients keep the CPU's layout by name, so the comparison is per PyTorch tensor.
TEST_F(CudaBackendTest, Bf16ModelTracksTheCpu) {
  auto bf16 = make_backend(DeviceType::cuda, 0, 1, MathMode::bf16);
  std::optional<CpuGpuPair> p;
  try {
    p.emplace(*cpu_, *bf16, 34);
  } catch (const Error& e) {
    if (std::string(e.what()).find("cuDNN >= 9.13") != std::string::npos) GTEST_SKIP() << e.what();
    throw;
  }
  p->expect_step_matches(2e-2, 0.1, "bf16");
}

TEST_F(CudaBackendTest, SgdStepsTrackTheCpu) {
  const ModelConfig config = model_config();
  Model mc(*cpu_, config), mg(*gpu_, config);
  mc.init(3);
  mg.init(3);
  OptimizerConfig oc;
  oc.kind = "sgd";
  oc.momentum = 0.9f;
  Optimizer oc_cpu(*cpu_, oc, mc.num_params()), oc_gpu(*gpu_, oc, mg.num_params());
  for (int step = 0; step < 5; ++step) {
    const Batch batch = random_batch(config, {8, 6, 3}, 40 + step);
    const float scale = 1.0f / static_cast<float>(batch.tokens());
    for (Model* m : {&mc, &mg}) m->backend().zero(m->grads().data(), m->grads().numel());
    const double lc = mc.forward_backward(batch, scale, step);
    const double lg = mg.forward_backward(batch, scale, step);
    EXPECT_NEAR(lg, lc, 1e-3 * std::fabs(lc)) << "step " << step;
    oc_cpu.step(mc.params().data(), mc.grads().data(), 0.5f);
    oc_gpu.step(mg.params().data(), mg.grads().data(), 0.5f);
  }
  const auto pc = named(mc, mc.download_params()), pg = named(mg, mg.download_params());
  for (const auto& [name, v] : pc) expect_close(pg.at(name), v, "param " + name, 1e-3);
}

// Checkpoints are written and read through the PyTorch-named views, and the optimizer state in the same
// order, so one written on either device resumes on the other with identical numbers (the cuDNN weight
// space and the CPU layout differ inside).
TEST_F(CudaBackendTest, CheckpointRoundTripBetweenCpuAndGpu) {
  const ModelConfig config = model_config();
  const std::vector<std::string> vocab = {"<pad>", "a", "b", "c", "d", "e", "f", "g", "h", "i", "j"};
  ASSERT_EQ(static_cast<int64_t>(vocab.size()), config.vocab);
  const auto dir = std::filesystem::temp_directory_path() / ("rnn_dist_gpu_ckpt_" + std::to_string(::getpid()));
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  OptimizerConfig oc;  // Adam: two moment estimates per parameter
  const Batch batch = random_batch(config, {6, 5, 2}, 60);
  for (Backend* from : {cpu_.get(), gpu_.get()}) {
    Backend* to = from == cpu_.get() ? gpu_.get() : cpu_.get();
    SCOPED_TRACE(from->device().str() + " -> " + to->device().str());
    Model src(*from, config), dst(*to, config);
    src.init(11);
    dst.init(12);  // different values, so a load that did nothing would fail
    Optimizer src_opt(*from, oc, src.num_params());
    from->zero(src.grads().data(), src.grads().numel());
    src.forward_backward(batch, 0.1f, 1);
    src_opt.step(src.params().data(), src.grads().data(), 0.01f);
    TrainingPosition pos;
    pos.step = from == cpu_.get() ? 1 : 2;
    write_checkpoint(dir.string(), 5, src, src_opt, {"char", vocab, {}, "", ""}, pos);
    const CheckpointData ck = read_checkpoint(checkpoint_path(dir.string(), pos.step), *to);
    dst.upload_params(ck.params);
    const auto want = named(src, src.download_params()), got = named(dst, dst.download_params());
    ASSERT_EQ(got.size(), want.size());
    for (const auto& [name, v] : want) EXPECT_EQ(got.at(name), v) << name;
    // Each moment estimate lands on the parameter it belongs to, in the other device's layout.
    ASSERT_EQ(ck.optimizer_state.size(), 2u);
    for (auto& [state, tensor] : src_opt.state()) {
      std::vector<float> flat(tensor->numel());
      from->download(flat.data(), tensor->data(), flat.size() * sizeof(float));
      for (const auto& [saved, values] : ck.optimizer_state) {
        if (saved != state) continue;
        const auto w = named(src, flat), g = named(dst, values);
        for (const auto& [name, v] : w) EXPECT_EQ(g.at(name), v) << state << " " << name;
      }
    }
  }
  std::filesystem::remove_all(dir);
}

TEST_F(CudaBackendTest, LocalRankWithoutGpuIsRefused) {
  const int visible = cuda_device_count();
  try {
    make_backend(DeviceType::cuda, visible, 1);
    ADD_FAILURE() << "no InputError for local rank " << visible;
  } catch (const InputError& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("local rank " + std::to_string(visible)), std::string::npos) << msg;
    EXPECT_NE(msg.find("CUDA_VISIBLE_DEVICES"), std::string::npos) << msg;
    EXPECT_NE(msg.find("host "), std::string::npos) << msg;
  }
}

// NCCL on one rank: every collective goes through NCCL (a sum over one rank leaves the values as they
// are), is only issued, and complete() waits for all of them at once: one host synchronisation.
TEST_F(CudaBackendTest, NcclSingleRankGoesThroughNccl) {
#if defined(RNN_DIST_HAVE_CUDA)
  auto bootstrap = make_single_process_communicator();
  auto nccl = make_nccl_communicator(*bootstrap, *gpu_);
  EXPECT_EQ(nccl->rank(), 0);
  EXPECT_EQ(nccl->size(), 1);
  const auto host = random_floats(1000, 50);
  const std::vector<double> doubles = {1.5, -2.25, 1e300};
  const std::vector<int64_t> ints = {7, -3, int64_t{1} << 40};
  std::vector<Bf16> halves(999);
  for (size_t i = 0; i < halves.size(); ++i) halves[i] = to_bf16(host[i]);
  DeviceVector<float> data(*gpu_, host), bcast(*gpu_, host);
  DeviceVector<double> gd(*gpu_, doubles);
  DeviceVector<int64_t> gi(*gpu_, ints);
  DeviceVector<Bf16> gh(*gpu_, halves);
  const int64_t syncs = gpu_->host_syncs();
  nccl->allreduce_sum(data.get(), 1000);
  nccl->reduce_scatter_sum(data.get(), 1000);
  nccl->allgather(data.get(), 1000);
  nccl->allreduce_sum(gd.get(), 3);
  nccl->allreduce_max(gi.get(), 3);
  nccl->allreduce_sum(gh.get(), 999);
  nccl->reduce_scatter_sum(gh.get(), 999);
  nccl->allgather(gh.get(), 999);
  nccl->broadcast(bcast.get(), 1000 * sizeof(float), 0);
  nccl->complete("the test's collectives");
  EXPECT_EQ(gpu_->host_syncs() - syncs, 1) << "one wait for every collective issued";
  nccl->complete("nothing");  // nothing issued since: no wait
  EXPECT_EQ(gpu_->host_syncs() - syncs, 1);
  EXPECT_EQ(data.host(), host);
  EXPECT_EQ(bcast.host(), host);
  EXPECT_EQ(gd.host(), doubles);
  EXPECT_EQ(gi.host(), ints);
  const auto gh_host = gh.host();
  for (size_t i = 0; i < halves.size(); ++i) ASSERT_EQ(gh_host[i].bits, halves[i].bits) << i;
  EXPECT_THROW(make_nccl_communicator(*bootstrap, *cpu_), Error);
#else
  GTEST_SKIP() << "no GPU path in this build";
#endif
}

// The crash every multi-rank GPU run would have hit: complete() polls a collective queued behind a long
// GEMM, so it sees cudaErrorNotReady, and the kernel launched next must not take that answer for its own
// failure.
TEST_F(CudaBackendTest, NcclWaitThroughNotReadyThenLaunch) {
#if defined(RNN_DIST_HAVE_CUDA)
  auto bootstrap = make_single_process_communicator();
  auto nccl = make_nccl_communicator(*bootstrap, *gpu_);
  const int64_t rows = 16384;
  const int in = 4096, out = 4096;  // 0.55 TFLOP: milliseconds on any GPU
  DeviceVector<float> x(*gpu_, std::vector<float>(rows * in, 0.01f)), w(*gpu_, std::vector<float>(int64_t{out} * in, 0.02f)),
      y(*gpu_, nans(rows * out));
  gpu_->synchronize();
  gpu_->linear_forward(x.get(), rows, in, w.get(), nullptr, out, y.get());
  nccl->allreduce_sum(y.get(), rows * out);
  const int64_t polls = nccl_not_ready_polls();
  nccl->complete("all-reduce behind a GEMM");
  EXPECT_GT(nccl_not_ready_polls(), polls) << "the wait never saw the collective unfinished";
  // The wait itself leaves nothing behind (cuDNN and cuBLAS read the slot too), and a launch succeeds.
  EXPECT_EQ(cuda_pending_error(), "");
  EXPECT_NO_THROW(gpu_->scale(y.get(), rows * out, 2.0f));
  std::vector<float> corner(4);
  gpu_->download(corner.data(), y.get(), corner.size() * sizeof(float));
  for (float v : corner) EXPECT_NEAR(v, 2.0 * in * 0.01 * 0.02, 1e-3);
#else
  GTEST_SKIP() << "no GPU path in this build";
#endif
}

// The NCCL mirror of a topology: node-level and cross-node communicators split from the world one, and
// the flat and hierarchical sums through them (a single rank: fp32 sums are identities, bfloat16 ones
// the CPU's rounding of each value), waited for once.
TEST_F(CudaBackendTest, NcclTopologySingleRank) {
#if defined(RNN_DIST_HAVE_CUDA)
  Topology mpi = make_single_process_topology();
  Topology nccl = make_nccl_topology(mpi, *gpu_);
  EXPECT_EQ(nccl.world_size(), 1);
  EXPECT_EQ(nccl.local_size(), 1);
  EXPECT_EQ(nccl.cross->size(), 1);
  EXPECT_EQ(nccl.host, mpi.host);
  const auto host = random_floats(1001, 51);
  std::vector<float> rounded(host.size());
  for (size_t i = 0; i < host.size(); ++i) rounded[i] = from_bf16(to_bf16(host[i]));
  Tensor scratch(*gpu_, {0});
  for (AllreduceAlgo algo : {AllreduceAlgo::flat, AllreduceAlgo::hierarchical}) {
    for (WireType wire : {WireType::fp32, WireType::bf16}) {
      SCOPED_TRACE(cat(algo == AllreduceAlgo::flat ? "flat" : "hierarchical", wire == WireType::bf16 ? " bf16" : " fp32"));
      DeviceVector<float> data(*gpu_, host);
      const int64_t syncs = gpu_->host_syncs();
      allreduce_sum(nccl, algo, data.get(), 1001, scratch, wire);
      nccl.world->complete("all-reduce");
      EXPECT_EQ(gpu_->host_syncs() - syncs, 1);
      EXPECT_EQ(data.host(), wire == WireType::fp32 ? host : rounded);
    }
  }
#else
  GTEST_SKIP() << "no GPU path in this build";
#endif
}

// bfloat16 conversions bit for bit against the CPU's (util/bfloat16.h): every bfloat16 back to float,
// and floats of every exponent, exact ties, the largest finite values, infinities and subnormals to
// bfloat16. A NaN stays a NaN; its payload is not promised (the CPU keeps the top payload bits and
// quiets them, the GPU's cvt.rn.bf16.f32 gives the canonical NaN): the all-reduce needs only that a NaN
// stays one, so that the step is skipped.
TEST_F(CudaBackendTest, Bf16ConversionsMatchTheCpu) {
  std::vector<Bf16> all(65536);
  for (uint32_t b = 0; b < all.size(); ++b) all[b].bits = static_cast<uint16_t>(b);
  DeviceVector<Bf16> gall(*gpu_, all);
  DeviceVector<float> widened(*gpu_, nans(all.size()));
  gpu_->from_bf16(widened.get(), gall.get(), static_cast<int64_t>(all.size()));
  const auto w = widened.host();
  for (size_t b = 0; b < all.size(); ++b) {
    const float want = from_bf16(all[b]);
    if (std::isnan(want))
      ASSERT_TRUE(std::isnan(w[b])) << b;
    else
      ASSERT_EQ(std::memcmp(&w[b], &want, sizeof(float)), 0) << "bfloat16 " << b << ": got " << w[b] << ", want " << want;
  }

  std::mt19937 rng(52);
  std::vector<uint32_t> patterns;
  for (int i = 0; i < 200000; ++i) patterns.push_back(rng());
  for (uint32_t hi = 0; hi < 65536; ++hi) patterns.push_back(hi << 16 | 0x8000u);  // every exact tie
  for (uint32_t u : {0x00000000u, 0x80000000u, 0x7f7fffffu, 0xff7fffffu, 0x7f7f8000u, 0x7f800000u, 0xff800000u,
                     0x00000001u, 0x007fffffu, 0x7fc00000u, 0x7fa00001u, 0xffffffffu})
    patterns.push_back(u);
  std::vector<float> x(patterns.size());
  std::memcpy(x.data(), patterns.data(), x.size() * sizeof(float));
  DeviceVector<float> gx(*gpu_, x);
  DeviceVector<Bf16> gy(*gpu_, std::vector<Bf16>(x.size(), Bf16{0x7f81}));  // a signalling NaN: neither writes it
  gpu_->to_bf16(gy.get(), gx.get(), static_cast<int64_t>(x.size()));
  const auto y = gy.host();
  for (size_t i = 0; i < x.size(); ++i) {
    const Bf16 want = to_bf16(x[i]);
    if (std::isnan(x[i]))
      ASSERT_TRUE(std::isnan(from_bf16(y[i])) && y[i].bits != 0x7f81) << std::hex << patterns[i];
    else
      ASSERT_EQ(y[i].bits, want.bits) << "float bits " << std::hex << patterns[i];
  }
}

// cuDNN's dropout between LSTM layers draws its own masks (the CPU's differ, see cudnn_lstm.cpp), so it
// is checked by its effect: with batch 1 and one step, column j of layer 1's input-weight gradient is zero
// exactly when unit j of layer 0's output was dropped, so the zero columns count the drops. Their rate
// must be p, the masks must change from call to call, and inference must not drop anything.
TEST_F(CudaBackendTest, CudnnInterLayerDropoutHasItsRate) {
  const int H = 512;
  const float p = 0.5f;
  auto dropped = gpu_->make_lstm({8, H, 2, p}), plain = gpu_->make_lstm({8, H, 2, 0.0f});
  std::map<std::string, std::vector<float>> values;
  uint32_t seed = 300;
  for (const ParamSlice& sl : plain->canonical_params()) values[sl.name] = random_floats(numel_of(sl.shape), seed++, 0.2f);
  DeviceVector<float> wd(*gpu_, by_name(*dropped, values)), wp(*gpu_, by_name(*plain, values));
  const Packing one = Packing::from_lengths(std::vector<int>{1});
  DeviceVector<float> x(*gpu_, random_floats(8, 310)), dy(*gpu_, random_floats(H, 311));

  DeviceVector<float> yd(*gpu_, nans(H)), yp(*gpu_, nans(H));
  ParamSlice ih1;
  for (const ParamSlice& sl : dropped->canonical_params())
    if (sl.name == "weight_ih_l1") ih1 = sl;
  ASSERT_EQ(ih1.shape, (std::vector<int64_t>{4 * H, H}));
  int64_t zero_columns = 0, samples = 0;
  std::vector<bool> first_mask;
  bool changed = false;
  for (int call = 0; call < 16; ++call) {
    DeviceVector<float> dw(*gpu_, std::vector<float>(dropped->weight_elems(), 0.0f));
    dropped->forward(wd.get(), one, x.get(), nullptr, nullptr, yd.get(), nullptr, nullptr, true, 99);
    dropped->backward(wd.get(), dy.get(), nullptr, nullptr, nullptr, nullptr, nullptr, dw.get());
    const auto g = slice_of(dw.host(), ih1);
    std::vector<bool> mask(H);
    for (int j = 0; j < H; ++j) {
      bool zero = true;
      for (int gate = 0; gate < 4 * H && zero; ++gate) zero = g[int64_t{gate} * H + j] == 0.0f;
      mask[j] = zero;
      zero_columns += zero;
    }
    samples += H;
    if (call == 0) first_mask = mask;
    changed = changed || mask != first_mask;
  }
  const double rate = double(zero_columns) / double(samples);
  EXPECT_NEAR(rate, p, 0.06) << zero_columns << " of " << samples << " units dropped";
  EXPECT_TRUE(changed) << "the same mask in 16 training passes";

  // Inference, after the training passes have switched the dropout on, drops nothing.
  dropped->forward(wd.get(), one, x.get(), nullptr, nullptr, yd.get(), nullptr, nullptr, false, 0);
  plain->forward(wp.get(), one, x.get(), nullptr, nullptr, yp.get(), nullptr, nullptr, false, 0);
  expect_close(yd.host(), yp.host(), "inference output of the LSTM with dropout");
}

// The loss over many logits blocks (a test hook cuts the GPU model's batch into blocks of 2 rows) adds up
// on the device to the CPU's loss over one block, with the same gradients.
TEST_F(CudaBackendTest, LossOverManyLogitsBlocksMatchesTheCpu) {
  ModelConfig c = model_config();
  CpuGpuPair(*cpu_, *gpu_, 36, c, 2 * c.vocab).expect_step_matches(kRtol, kRtol, "language model, 13 blocks");
  c.task = Task::tag;
  c.classes = 5;
  c.bidirectional = true;
  CpuGpuPair(*cpu_, *gpu_, 37, c, 2 * c.classes).expect_step_matches(kRtol, kRtol, "tagger, blocks of 2 rows");
}

}  // namespace
}  // namespace rnn_dist

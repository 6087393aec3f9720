// Tests of the sequence model (model.h) on the CPU backend (also its tied and adaptive-softmax heads): make_batch's time-major packing, the gradient
// of forward_backward against central finite differences of evaluate (float, loose tolerance), evaluate
// equal to forward_backward's loss, gradient accumulation and grad_scale, dropout determinism per seed,
// init determinism, param_slices names/shapes/layout, 1 and 3 threads and the inference pass agreeing with
// the training pass, a state carried in place (initial and final state in one device buffer) equal to
// separate buffers, the output layer in blocks of one row equal to one block, and step's
// log-probabilities (normalised, and equal to evaluate's NLL on a 2-token sequence).
#include "rnn_dist/nn/model.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "rnn_dist/backends/make_backend.h"
#include "rnn_dist/cpu/cpu_kernels.h"
#include "rnn_dist/nn/backend.h"
#include "rnn_dist/util/error.h"

namespace rnn_dist {
namespace {

ModelConfig small_config(float dropout = 0.0f) {
  ModelConfig c;
  c.vocab = 7;
  c.embed = 3;
  c.hidden = 4;
  c.layers = 2;
  c.dropout = dropout;
  return c;
}

// Random tokens for sequences of the given (non-increasing) lengths.
Batch random_batch(const std::vector<int64_t>& lengths, int64_t vocab, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int32_t> tok(0, static_cast<int32_t>(vocab - 1));
  std::vector<int32_t> tokens;
  for (int64_t l : lengths)
    for (int64_t i = 0; i < l; ++i) tokens.push_back(tok(rng));
  return make_batch(tokens, lengths);
}

// a equals b up to float summation order: max |a - b| <= 1e-5 max |b|, b not all zero.
void expect_close(const std::vector<float>& a, const std::vector<float>& b, const std::string& what) {
  ASSERT_EQ(a.size(), b.size()) << what;
  double err = 0, ref = 0;
  for (size_t i = 0; i < a.size(); ++i) err = std::max(err, double(std::abs(a[i] - b[i]))), ref = std::max(ref, double(std::abs(b[i])));
  EXPECT_GT(ref, 0) << what;
  EXPECT_LE(err, 1e-5 * ref) << what;
}

std::vector<float> download_grads(Model& m) {
  std::vector<float> g(m.num_params());
  m.backend().download(g.data(), m.grads().data(), g.size() * sizeof(float));
  return g;
}

// States go to the model in device memory of its backend.
Tensor to_device(Backend& backend, const std::vector<float>& host) {
  Tensor t(backend, {static_cast<int64_t>(host.size())});
  backend.upload(t.data(), host.data(), host.size() * sizeof(float));
  return t;
}

std::vector<float> to_host(const Tensor& t) {
  std::vector<float> host(t.numel());
  t.backend().download(host.data(), t.data(), host.size() * sizeof(float));
  return host;
}

TEST(Model, MakeBatchIsTimeMajor) {
  // Sequences 1 2 3 4 | 5 6 7 | 8 9: steps 3, 2, 1.
  const Batch b = make_batch({1, 2, 3, 4, 5, 6, 7, 8, 9}, {4, 3, 2});
  EXPECT_EQ(b.packing.batch(), 3);
  EXPECT_EQ(b.packing.steps(), 3);
  EXPECT_EQ(b.tokens(), 6);
  EXPECT_EQ(b.inputs, (std::vector<int32_t>{1, 5, 8, 2, 6, 3}));
  EXPECT_EQ(b.targets, (std::vector<int32_t>{2, 6, 9, 3, 7, 4}));
  EXPECT_THROW(make_batch({1, 2, 3}, {2, 1}), Error);     // a sequence shorter than 2
  EXPECT_THROW(make_batch({1, 2, 3, 4}, {2, 3}), Error);  // increasing lengths
  EXPECT_THROW(make_batch({1, 2, 3, 4}, {3}), Error);     // lengths do not add up
}

// --precision names, both ways; an unknown one is an input error naming the option.
TEST(Backend, PrecisionNames) {
  for (MathMode m : {MathMode::fp32, MathMode::tf32, MathMode::bf16}) EXPECT_EQ(math_mode_from(math_mode_name(m)), m);
  EXPECT_THROW(math_mode_from("fp16"), InputError);
}

// TF32 and bf16 are GPU math modes: the CPU backend refuses them rather than silently computing in fp32.
TEST(Backend, CpuRefusesTf32) {
  EXPECT_THROW(make_backend(DeviceType::cpu, 0, 1, MathMode::tf32), Error);
  EXPECT_THROW(make_backend(DeviceType::cpu, 0, 1, MathMode::bf16), Error);
  EXPECT_EQ(make_backend(DeviceType::cpu, 0, 1, MathMode::fp32)->device(), (Device{DeviceType::cpu, 0}));
}

TEST(Model, ParamSlicesNamesShapesAndLayout) {
  auto backend = make_backend(DeviceType::cpu, 0, 1);
  Model m(*backend, small_config());
  const int64_t V = 7, E = 3, H = 4;
  struct Want {
    std::string name;
    std::vector<int64_t> shape;
  };
  const std::vector<Want> want{{"emb.weight", {V, E}},          {"lstm.weight_ih_l0", {4 * H, E}},
                               {"lstm.weight_hh_l0", {4 * H, H}}, {"lstm.bias_ih_l0", {4 * H}},
                               {"lstm.bias_hh_l0", {4 * H}},      {"lstm.weight_ih_l1", {4 * H, H}},
                               {"lstm.weight_hh_l1", {4 * H, H}}, {"lstm.bias_ih_l1", {4 * H}},
                               {"lstm.bias_hh_l1", {4 * H}},      {"out.weight", {V, H}},
                               {"out.bias", {V}}};
  const auto& slices = m.param_slices();
  ASSERT_EQ(slices.size(), want.size());
  int64_t total = 0;
  for (size_t i = 0; i < want.size(); ++i) {
    EXPECT_EQ(slices[i].name, want[i].name);
    EXPECT_EQ(slices[i].shape, want[i].shape) << want[i].name;
    total += numel_of(slices[i].shape);
  }
  EXPECT_EQ(m.parameter_count(), total);
  // The slices lie in the flat buffer without overlap; the four regions (embedding, LSTM, output weight and
  // bias) start 256-byte aligned, and what lies between them is a gap of less than the alignment, zero.
  std::vector<int> cover(m.num_params(), 0);
  for (const ParamSlice& s : slices) {
    ASSERT_GE(s.offset, 0);
    ASSERT_LE(s.offset + numel_of(s.shape), m.num_params()) << s.name;
    for (int64_t i = 0; i < numel_of(s.shape); ++i) ++cover[s.offset + i];
    if (s.name == "emb.weight" || s.name == "lstm.weight_ih_l0" || s.name.starts_with("out.")) {
      EXPECT_EQ(s.offset % kAlignElems, 0) << s.name;
    }
  }
  int64_t gaps = 0;
  for (int64_t i = 0; i < m.num_params(); ++i) {
    EXPECT_LE(cover[i], 1) << "element " << i;
    gaps += cover[i] == 0;
  }
  EXPECT_EQ(gaps, m.num_params() - total);
  EXPECT_LT(gaps, 3 * kAlignElems);
  m.init(7);
  const std::vector<float> p = m.download_params();
  for (int64_t i = 0; i < m.num_params(); ++i) {
    if (cover[i] == 0) {
      EXPECT_EQ(p[i], 0.0f) << "gap element " << i;
    }
  }
}

TEST(Model, InitIsDeterministicAndInRange) {
  auto backend = make_backend(DeviceType::cpu, 0, 1);
  Model a(*backend, small_config()), b(*backend, small_config());
  a.init(11);
  b.init(11);
  const auto pa = a.download_params();
  EXPECT_EQ(pa, b.download_params());
  b.init(12);
  EXPECT_NE(pa, b.download_params());
  const double bound = 1.0 / std::sqrt(4.0);
  for (const ParamSlice& s : a.param_slices()) {
    if (s.name == "emb.weight") continue;  // N(0, 1)
    bool nonzero = false;
    for (int64_t i = 0; i < numel_of(s.shape); ++i) {
      EXPECT_LE(std::abs(pa[s.offset + i]), bound) << s.name;
      nonzero = nonzero || pa[s.offset + i] != 0.0f;
    }
    EXPECT_TRUE(nonzero) << s.name;
  }
}

// forward_backward's gradient against central finite differences of evaluate: per slice, the vectors of
// analytic and numeric derivatives over ~30 random elements, whose relative distance float noise (~1e-4
// per derivative here) cannot push over 2e-2 unless the gradient is wrong, and which a missing or
// mis-scaled term would.
void expect_gradients_match(Model& m, const Batch& batch, const std::string& what) {
  const double loss = m.forward_backward(batch, 1.0f, 0);
  EXPECT_NEAR(m.evaluate(batch), loss, 1e-6 * std::abs(loss)) << what;
  const auto grads = download_grads(m);
  const auto base = m.download_params();
  std::mt19937 rng(5);
  const float eps = 1e-2f;
  for (const ParamSlice& s : m.param_slices()) {
    const int64_t n = numel_of(s.shape);
    std::uniform_int_distribution<int64_t> pick(0, n - 1);
    double diff2 = 0, norm2 = 0;
    for (int k = 0; k < 30; ++k) {
      const int64_t i = s.offset + pick(rng);
      auto p = base;
      p[i] = base[i] + eps;
      m.upload_params(p);
      const double up = m.evaluate(batch);
      p[i] = base[i] - eps;
      m.upload_params(p);
      const double down = m.evaluate(batch);
      // The actual step taken in float.
      const double h = double(base[i] + eps) - double(base[i] - eps);
      const double numeric = (up - down) / h;
      diff2 += (numeric - grads[i]) * (numeric - grads[i]);
      norm2 += numeric * numeric;
      EXPECT_NEAR(grads[i], numeric, 2e-2 * std::abs(numeric) + 2e-3) << what << " " << s.name << " element " << i - s.offset;
    }
    m.upload_params(base);
    EXPECT_GT(std::sqrt(norm2), 5e-3) << what << " " << s.name << ": derivatives too small for a meaningful check";
    EXPECT_LE(std::sqrt(diff2), 2e-2 * std::sqrt(norm2)) << what << " " << s.name;
  }
}

TEST(Model, GradientMatchesFiniteDifferences) {
  auto backend = make_backend(DeviceType::cpu, 0, 1);
  Model m(*backend, small_config());
  m.init(3);
  expect_gradients_match(m, random_batch({6, 5, 5, 3, 2}, 7, 17), "language model");
}

// --sparse-embedding: the touched rows, over two accumulated passes, are bitwise the dense model's rows of
// emb.weight's gradient (which the finite differences above check), every other gradient is the dense
// one, and the embedding's region of grads() stays zero.
TEST(Model, SparseEmbeddingGradientIsTheDenseOne) {
  for (int threads : {1, 2}) {
    auto backend = make_backend(DeviceType::cpu, 0, threads);
    ModelConfig sc = small_config();
    sc.vocab = 40;
    Model dense(*backend, sc);
    sc.sparse_embedding = true;
    Model sparse(*backend, sc);
    dense.init(3);
    sparse.init(3);
    ASSERT_EQ(sparse.dense_grad_offset(), sparse.param_slices()[1].offset);
    SparseRows& rows = *sparse.sparse_embedding_grad();
    rows.clear();
    for (uint32_t seed : {17u, 18u}) {
      const Batch batch = random_batch({6, 5, 5, 3, 2}, 11, seed);  // ids below 11 of 40: most rows untouched
      dense.forward_backward(batch, 0.5f, 0);
      sparse.forward_backward(batch, 0.5f, 0);
    }
    const auto gd = download_grads(dense), gs = download_grads(sparse);
    const int64_t E = sc.embed, d0 = sparse.dense_grad_offset();
    for (int64_t i = 0; i < d0; ++i) ASSERT_EQ(gs[i], 0.0f) << "dense embedding gradient element " << i;
    for (int64_t i = d0; i < static_cast<int64_t>(gd.size()); ++i) ASSERT_EQ(gs[i], gd[i]) << "gradient element " << i;
    std::vector<bool> seen(static_cast<size_t>(sc.vocab), false);
    EXPECT_GT(rows.size(), 3);
    EXPECT_LE(rows.size(), 11);
    for (int64_t j = 0; j < rows.size(); ++j) {
      const int32_t id = rows.ids()[static_cast<size_t>(j)];
      seen[static_cast<size_t>(id)] = true;
      for (int64_t c = 0; c < E; ++c) EXPECT_EQ(rows.rows()[j * E + c], gd[id * E + c]) << "row " << id;
    }
    for (int64_t id = 0; id < sc.vocab; ++id) {
      if (seen[static_cast<size_t>(id)]) continue;
      for (int64_t c = 0; c < E; ++c) EXPECT_EQ(gd[id * E + c], 0.0f) << "untouched row " << id << " has a gradient";
    }
  }
}

TEST(Model, GradientsAccumulateAndScale) {
  auto backend = make_backend(DeviceType::cpu, 0, 1);
  Model m(*backend, small_config());
  m.init(4);
  const Batch batch = random_batch({5, 4, 2}, 7, 23);
  m.forward_backward(batch, 1.0f, 0);
  const auto once = download_grads(m);
  m.forward_backward(batch, 0.5f, 0);
  const auto accumulated = download_grads(m);
  double norm = 0;
  for (size_t i = 0; i < once.size(); ++i) {
    EXPECT_NEAR(accumulated[i], 1.5f * once[i], 1e-5f + 1e-5f * std::abs(once[i])) << "element " << i;
    norm += std::abs(once[i]);
  }
  EXPECT_GT(norm, 0.0);
}

// The trainer's form of the pass adds its loss into a double of the backend's memory, over as many logits
// blocks as it takes (a block of one row here), and reads nothing back: the double then holds what it
// held plus forward_backward's loss. Reads go one at a time.
TEST(Model, ForwardBackwardIntoAddsTheLossOnTheDevice) {
  auto backend = make_backend(DeviceType::cpu, 0, 1);
  Model whole(*backend, small_config()), rows(*backend, small_config(), 7);
  whole.init(5);
  rows.init(5);
  const Batch batch = random_batch({5, 4, 2}, 7, 29);
  const double want = whole.forward_backward(batch, 1.0f, 0);
  Buffer sum(*backend, sizeof(double));
  auto* d = static_cast<double*>(sum.data());
  *d = 1.5;  // CPU memory is host memory
  rows.forward_backward_into(d, batch, 1.0f, 0);
  double got = 0;
  backend->start_read(d, 1);
  EXPECT_THROW(backend->start_read(d, 1), Error);
  backend->finish_read(&got);
  EXPECT_NEAR(got, 1.5 + want, 1e-9 * want);
  EXPECT_THROW(backend->finish_read(&got), Error);
  const auto a = download_grads(whole), b = download_grads(rows);
  for (size_t i = 0; i < a.size(); ++i) ASSERT_NEAR(b[i], a[i], 1e-6f + 1e-5f * std::abs(a[i])) << i;
}

TEST(Model, DropoutIsSeeded) {
  auto backend = make_backend(DeviceType::cpu, 0, 1);
  Model m(*backend, small_config(0.5f));
  m.init(6);
  const Batch batch = random_batch({8, 7, 6, 4}, 7, 29);
  const double a = m.forward_backward(batch, 1.0f, 100);
  const double b = m.forward_backward(batch, 1.0f, 100);
  const double c = m.forward_backward(batch, 1.0f, 101);
  EXPECT_EQ(a, b);
  EXPECT_NE(a, c);
  // Evaluation has no dropout: deterministic, and different from the training losses.
  const double e = m.evaluate(batch);
  EXPECT_EQ(e, m.evaluate(batch));
  EXPECT_NE(e, a);
}

// The same model on backends of 1 and 3 threads: equal losses, gradients and final states (up to float
// summation order), and evaluate (the inference pass, which keeps no activations) equals forward_backward's
// loss and states; with 3 layers and H = 20 the inter-layer buffers alternate and a thread's share of the
// hidden units ends in a partial vector.
TEST(Model, ThreadsAndInferenceAgree) {
  ModelConfig c;
  c.vocab = 13, c.embed = 6, c.hidden = 20, c.layers = 3;
  const Batch batch = random_batch({12, 9, 9, 5, 2}, c.vocab, 31);
  const int64_t state = int64_t{c.layers} * batch.packing.batch() * c.hidden;
  std::mt19937 rng(2);
  std::uniform_real_distribution<float> u(-0.5f, 0.5f);
  std::vector<float> h0(state), c0(state);
  for (float& v : h0) v = u(rng);
  for (float& v : c0) v = u(rng);
  struct Out {
    double loss, eval;
    std::vector<float> grads, hn, cn, hn_eval, cn_eval;
  };
  auto run = [&](int threads) {
    auto backend = make_backend(DeviceType::cpu, 0, threads);
    Model m(*backend, c);
    m.init(5);
    const Tensor dh0 = to_device(*backend, h0), dc0 = to_device(*backend, c0);
    Tensor hn(*backend, {state}), cn(*backend, {state}), hn_eval(*backend, {state}), cn_eval(*backend, {state});
    Out o;
    o.loss = m.forward_backward(batch, 0.1f, 0, dh0.data(), dc0.data(), hn.data(), cn.data());
    o.grads = download_grads(m);
    o.eval = m.evaluate(batch, dh0.data(), dc0.data(), hn_eval.data(), cn_eval.data());
    o.hn = to_host(hn), o.cn = to_host(cn), o.hn_eval = to_host(hn_eval), o.cn_eval = to_host(cn_eval);
    return o;
  };
  const Out one = run(1), three = run(3);
  EXPECT_NEAR(one.eval, one.loss, 1e-6 * one.loss);
  expect_close(one.hn_eval, one.hn, "evaluate hn");
  expect_close(one.cn_eval, one.cn, "evaluate cn");
  EXPECT_NEAR(three.loss, one.loss, 1e-6 * one.loss);
  EXPECT_NEAR(three.eval, one.eval, 1e-6 * one.loss);
  expect_close(three.grads, one.grads, "gradients with 3 threads");
  expect_close(three.hn, one.hn, "hn with 3 threads");
  expect_close(three.cn, one.cn, "cn with 3 threads");
  expect_close(three.hn_eval, one.hn, "evaluate hn with 3 threads");
}

// The trainer carries the stream state in place: one device buffer is both the initial and the final
// state. That gives the same loss, gradients and final state as separate buffers, in training (whose
// backward pass needs the initial state after the forward pass wrote the final one) and in evaluation.
TEST(Model, StateCarriedInPlaceEqualsSeparateBuffers) {
  auto backend = make_backend(DeviceType::cpu, 0, 1);
  const ModelConfig c = small_config(0.25f);
  Model m(*backend, c);
  m.init(12);
  const Batch batch = random_batch({6, 6, 6}, c.vocab, 37);
  const int64_t state = int64_t{c.layers} * batch.packing.batch() * c.hidden;
  std::mt19937 rng(3);
  std::uniform_real_distribution<float> u(-0.5f, 0.5f);
  std::vector<float> h0c0(2 * state);  // h then c
  for (float& v : h0c0) v = u(rng);
  for (bool train : {true, false}) {
    auto pass = [&](const float* h, const float* c0, float* hn, float* cn) {
      backend->zero(m.grads().data(), m.num_params());
      return train ? m.forward_backward(batch, 0.5f, 4, h, c0, hn, cn) : m.evaluate(batch, h, c0, hn, cn);
    };
    const Tensor initial = to_device(*backend, h0c0);
    Tensor final_state(*backend, {2 * state});
    const double want = pass(initial.data(), initial.data() + state, final_state.data(), final_state.data() + state);
    const std::vector<float> want_grads = download_grads(m);
    Tensor carried = to_device(*backend, h0c0);
    const double got = pass(carried.data(), carried.data() + state, carried.data(), carried.data() + state);
    const char* what = train ? "forward_backward" : "evaluate";
    EXPECT_EQ(got, want) << what;
    EXPECT_EQ(download_grads(m), want_grads) << what;
    EXPECT_EQ(to_host(carried), to_host(final_state)) << what;
  }
}

// The output layer and the loss run in blocks of rows (model.h): one row per block gives the loss and the
// gradients of one block for the whole batch, up to the order of the sums.
TEST(Model, LogitsInBlocksEqualOneBlock) {
  auto backend = make_backend(DeviceType::cpu, 0, 1);
  const ModelConfig config = small_config();
  Model whole(*backend, config), rows(*backend, config, config.vocab);
  whole.init(5);
  rows.init(5);
  const Batch batch = random_batch({9, 6, 6, 3}, config.vocab, 17);  // 20 rows: 20 blocks against 1
  for (Model* m : {&whole, &rows}) backend->zero(m->grads().data(), m->grads().numel());
  const double lw = whole.forward_backward(batch, 0.5f, 3), lr = rows.forward_backward(batch, 0.5f, 3);
  EXPECT_NEAR(lr, lw, 1e-9 * std::fabs(lw));
  const auto gw = download_grads(whole), gr = download_grads(rows);
  for (size_t i = 0; i < gw.size(); ++i) ASSERT_NEAR(gr[i], gw[i], 1e-6f * (1 + std::fabs(gw[i]))) << "parameter " << i;
  EXPECT_NEAR(rows.evaluate(batch), whole.evaluate(batch), 1e-9 * std::fabs(lw));
}

TEST(Model, StepMatchesEvaluate) {
  auto backend = make_backend(DeviceType::cpu, 0, 1);
  Model m(*backend, small_config());
  m.init(8);
  const int64_t state = 2 * 4;  // layers x hidden
  for (int32_t first = 0; first < 7; ++first) {
    std::vector<float> h(state, 0.0f), c(state, 0.0f);
    const auto logp = m.step(first, h, c);
    ASSERT_EQ(logp.size(), 7u);
    double sum = 0;
    for (float v : logp) sum += std::exp(double{v});
    EXPECT_NEAR(sum, 1.0, 1e-5);
    const int32_t target = (first * 3 + 1) % 7;
    Tensor hn_device(*backend, {state}), cn_device(*backend, {state});
    const double nll =
        m.evaluate(make_batch({first, target}, {2}), nullptr, nullptr, hn_device.data(), cn_device.data());
    const std::vector<float> hn = to_host(hn_device), cn = to_host(cn_device);
    EXPECT_NEAR(nll, -double{logp[target]}, 1e-5) << "first " << first;
    // The state after one step equals the final state of the 1-step sequence.
    for (int64_t i = 0; i < state; ++i) {
      EXPECT_NEAR(h[i], hn[i], 1e-6) << "h " << i;
      EXPECT_NEAR(c[i], cn[i], 1e-6) << "c " << i;
    }
  }
  std::vector<float> wrong(3);
  EXPECT_THROW(m.step(0, wrong, wrong), Error);
}

// The two heads of a language model at vocabulary scale (model.h): tied embeddings and the adaptive softmax.
ModelConfig tied_config() {
  ModelConfig c = small_config();
  c.embed = c.hidden = 4;
  c.tie_embeddings = true;
  return c;
}

ModelConfig adaptive_config() {
  ModelConfig c = small_config();
  c.vocab = 13;
  c.hidden = 8;
  c.cutoffs = {3, 7};  // the shortlist 0-2, clusters 3-6 (projection 8 / 2 = 4 wide) and 7-12 (2 wide)
  c.div_value = 2;
  return c;
}

TEST(Model, TiedAndAdaptiveHeadsNamesAndShapes) {
  auto backend = make_backend(DeviceType::cpu, 0, 1);
  auto names = [](const Model& m) {
    std::vector<std::pair<std::string, std::vector<int64_t>>> out;
    for (const ParamSlice& s : m.param_slices())
      if (!s.name.starts_with("lstm.")) out.emplace_back(s.name, s.shape);
    return out;
  };
  Model tied(*backend, tied_config());
  using Shapes = std::vector<std::pair<std::string, std::vector<int64_t>>>;
  EXPECT_EQ(names(tied), (Shapes{{"emb.weight", {7, 4}}, {"out.bias", {7}}}));  // out.weight is emb.weight
  Model adaptive(*backend, adaptive_config());
  EXPECT_EQ(names(adaptive), (Shapes{{"emb.weight", {13, 3}},
                                     {"out.head.weight", {3 + 2, 8}},
                                     {"out.tail.0.0.weight", {4, 8}},
                                     {"out.tail.0.1.weight", {4, 4}},
                                     {"out.tail.1.0.weight", {2, 8}},
                                     {"out.tail.1.1.weight", {6, 2}}}));
  EXPECT_EQ(head_name(adaptive.config()), "adaptive softmax (cutoffs 3,7, div-value 2)");
  // Cluster widths as PyTorch's float floor division gives them: 650 // 1.3 is 499 (650 / 1.3 rounds to 500).
  ModelConfig odd = adaptive_config();
  odd.hidden = 650;
  odd.cutoffs = {3};
  odd.div_value = 1.3;
  EXPECT_EQ(Model(*backend, odd).param_slices().back().shape, (std::vector<int64_t>{13 - 3, 499}));
  EXPECT_EQ(head_name(tied.config()), "full softmax, tied embeddings");
  // nn.Linear's initialisation of each head matrix: U(-1/sqrt(in), 1/sqrt(in)); the tied matrix as out.weight's.
  adaptive.init(4);
  tied.init(4);
  for (Model* m : {&adaptive, &tied}) {
    const std::vector<float> p = m->download_params();
    for (const ParamSlice& s : m->param_slices()) {
      if (s.name.starts_with("lstm.") || (s.name == "emb.weight" && !m->config().tie_embeddings)) continue;
      const double k = 1 / std::sqrt(double(s.shape.size() == 2 ? s.shape[1] : m->config().features()));
      float most = 0;
      for (int64_t i = 0; i < numel_of(s.shape); ++i) most = std::max(most, std::fabs(p[size_t(s.offset + i)]));
      EXPECT_LE(most, k) << s.name;
      EXPECT_GT(most, 0.5 * k) << s.name;
    }
  }
}

TEST(Model, TiedAndAdaptiveRefusals) {
  auto backend = make_backend(DeviceType::cpu, 0, 1);
  auto refused = [&](ModelConfig c) {
    try {
      Model m(*backend, c);
    } catch (const InputError& e) {
      return std::string(e.what());
    }
    return std::string("accepted");
  };
  ModelConfig c = tied_config();
  c.embed = 3;
  EXPECT_EQ(refused(c), "--tie-embeddings: the embedding is 3 wide (--embed) but the output layer reads 4 features "
                        "(--hidden): they must be equal");
  c = adaptive_config();
  c.tie_embeddings = true;
  c.embed = c.hidden;
  EXPECT_NE(refused(c).find("--tie-embeddings with --softmax adaptive"), std::string::npos);
  for (std::vector<int64_t> bad : {std::vector<int64_t>{0, 7}, {3, 3}, {7, 3}, {3, 13}}) {
    c = adaptive_config();
    c.cutoffs = bad;
    EXPECT_NE(refused(c).find("--cutoffs: "), std::string::npos) << refused(c);
  }
  c = adaptive_config();
  c.div_value = 9;  // 8 / 9 < 1
  EXPECT_NE(refused(c).find("--div-value 9: cluster 0's projection would be 8 / 9^1 < 1 wide"), std::string::npos)
      << refused(c);
  c = tied_config();
  c.task = Task::tag;
  c.classes = 3;
  EXPECT_NE(refused(c).find("language models only"), std::string::npos) << refused(c);
  EXPECT_EQ(parse_cutoffs("3,7", "x"), (std::vector<int64_t>{3, 7}));
  EXPECT_THROW(parse_cutoffs("3,,7", "x"), InputError);
  EXPECT_EQ(parse_cutoffs("7,3", "x"), (std::vector<int64_t>{7, 3}));  // refused by Model, with the vocabulary
  EXPECT_THROW(parse_cutoffs("", "x"), InputError);
  EXPECT_THROW(parse_cutoffs("2000,", "x"), InputError);
}

TEST(Model, TiedAndAdaptiveGradientsMatchFiniteDifferences) {
  auto backend = make_backend(DeviceType::cpu, 0, 1);
  Model tied(*backend, tied_config());
  tied.init(3);
  expect_gradients_match(tied, random_batch({6, 5, 5, 3, 2}, 7, 17), "tied embeddings");
  // Targets in every part of the adaptive softmax: the shortlist and both clusters.
  Model adaptive(*backend, adaptive_config());
  adaptive.init(3);
  const Batch batch = random_batch({9, 8, 6, 5, 3}, 13, 21);
  std::vector<int> parts(3, 0);
  for (int32_t t : batch.targets) ++parts[t < 3 ? 0 : t < 7 ? 1 : 2];
  for (int n : parts) ASSERT_GT(n, 2);
  expect_gradients_match(adaptive, batch, "adaptive softmax");
}

// The adaptive loss of a target is -log_probs at it: the training pass's cross-entropies (head plus the
// target's cluster only) against the full distribution, which must also sum to 1 per row; in blocks of
// one row the loss and the gradients are those of one block.
TEST(Model, AdaptiveLossIsTheFullDistributionsAtTheTarget) {
  auto backend = make_backend(DeviceType::cpu, 0, 1);
  const ModelConfig config = adaptive_config();
  Model m(*backend, config), rows(*backend, config, 1);
  m.init(6);
  rows.init(6);
  const Batch batch = random_batch({9, 8, 6, 5, 3}, 13, 22);
  const std::vector<float> lp = m.log_probs(batch);
  ASSERT_EQ(lp.size(), batch.targets.size() * 13);
  double nll = 0;
  for (size_t r = 0; r < batch.targets.size(); ++r) {
    double mass = 0;
    for (int j = 0; j < 13; ++j) mass += std::exp(double{lp[r * 13 + j]});
    EXPECT_NEAR(mass, 1.0, 1e-5) << "row " << r;
    nll -= lp[r * 13 + size_t(batch.targets[r])];
  }
  EXPECT_NEAR(m.evaluate(batch), nll, 1e-5 * nll);
  for (Model* x : {&m, &rows}) backend->zero(x->grads().data(), x->grads().numel());
  const double lw = m.forward_backward(batch, 0.5f, 3), lr = rows.forward_backward(batch, 0.5f, 3);
  EXPECT_NEAR(lr, lw, 1e-9 * lw);
  const auto gw = download_grads(m), gr = download_grads(rows);
  for (size_t i = 0; i < gw.size(); ++i) ASSERT_NEAR(gr[i], gw[i], 1e-6f * (1 + std::fabs(gw[i]))) << "parameter " << i;
  // Sampling's step() gives the same distribution as log_probs for a one-token sequence.
  std::vector<float> h(2 * 8, 0.0f), c(2 * 8, 0.0f);
  const std::vector<float> step = m.step(5, h, c);
  const std::vector<float> first = m.log_probs(make_batch({5, 0}, {2}));
  ASSERT_EQ(step.size(), first.size());
  for (size_t j = 0; j < step.size(); ++j) EXPECT_NEAR(step[j], first[j], 1e-6) << "id " << j;
  // A target outside the vocabulary is refused, naming it.
  Batch bad = batch;
  bad.targets[4] = 13;
  EXPECT_THROW(m.evaluate(bad), Error);
}

// The LSTM with a projection (--proj-size): weight_hr_l{k} after each layer's biases, weight_hh 4H x P,
// layer 1 and the head reading P features; gradients against finite differences (bidirectional projected
// layers, whose small recurrent derivatives this float check cannot see, are checked in double in
// test_bidirectional); step() carries h P wide and c H wide, equal to evaluate.
TEST(Model, ProjectionShapesGradientsAndStep) {
  auto backend = make_backend(DeviceType::cpu, 0, 1);
  ModelConfig c = small_config();
  c.hidden = 5;
  c.proj = 3;
  Model m(*backend, c);
  std::vector<std::pair<std::string, std::vector<int64_t>>> got;
  for (const ParamSlice& s : m.param_slices()) got.emplace_back(s.name, s.shape);
  using Shapes = std::vector<std::pair<std::string, std::vector<int64_t>>>;
  EXPECT_EQ(got, (Shapes{{"emb.weight", {7, 3}},          {"lstm.weight_ih_l0", {20, 3}}, {"lstm.weight_hh_l0", {20, 3}},
                         {"lstm.bias_ih_l0", {20}},       {"lstm.bias_hh_l0", {20}},      {"lstm.weight_hr_l0", {3, 5}},
                         {"lstm.weight_ih_l1", {20, 3}},  {"lstm.weight_hh_l1", {20, 3}}, {"lstm.bias_ih_l1", {20}},
                         {"lstm.bias_hh_l1", {20}},       {"lstm.weight_hr_l1", {3, 5}},  {"out.weight", {7, 3}},
                         {"out.bias", {7}}}));
  m.init(3);
  expect_gradients_match(m, random_batch({9, 9, 8, 8, 8, 7, 7, 6, 6, 5, 5, 4, 3, 3, 2}, 7, 17), "projected language model");
  std::vector<float> h(2 * 3, 0.0f), cs(2 * 5, 0.0f);
  const std::vector<float> logp = m.step(4, h, cs);
  EXPECT_NEAR(m.evaluate(make_batch({4, 6}, {2})), -double{logp[6]}, 1e-5);
  std::vector<float> wrong(2 * 5, 0.0f);
  EXPECT_THROW(m.step(4, wrong, cs), Error);  // h is P wide
  ModelConfig bad = c;
  bad.proj = 5;
  EXPECT_THROW(Model(*backend, bad), InputError);  // proj must be below hidden, as in PyTorch
}

ModelConfig labelled_config(Task task, bool bidirectional, Pool pool = Pool::last) {
  ModelConfig c = small_config();
  c.task = task;
  c.classes = 3;
  c.bidirectional = bidirectional;
  c.pool = pool;
  return c;
}

// Framed sequences (<s> = 1, </s> = 2: the model does not care which ids they are) of random tokens,
// with a random label per sequence, or a tag per token (-1 on the framing).
struct Labelled {
  std::vector<int32_t> tokens, targets;
  std::vector<int64_t> lengths;
  Batch batch(Task task) const { return make_batch(task, tokens, lengths, targets); }
};
Labelled random_labelled(Task task, const std::vector<int64_t>& lengths, int64_t vocab, int classes, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int32_t> tok(3, static_cast<int32_t>(vocab - 1)), cls(0, classes - 1);
  Labelled l;
  l.lengths = lengths;
  for (int64_t n : lengths) {
    if (task == Task::classify) l.targets.push_back(cls(rng));
    for (int64_t i = 0; i < n; ++i) {
      const bool framing = i == 0 || i == n - 1;
      l.tokens.push_back(i == 0 ? 1 : i == n - 1 ? 2 : tok(rng));
      if (task == Task::tag) l.targets.push_back(framing ? -1 : cls(rng));
    }
  }
  return l;
}

TEST(Model, LabelledBatchesDropTheFraming) {
  // <s> a b c </s> | <s> d e </s> | <s> f </s>: steps 3, 2, 1 of the tokens between the framing.
  const std::vector<int32_t> tokens = {1, 10, 11, 12, 2, 1, 13, 14, 2, 1, 15, 2};
  const std::vector<int64_t> lengths = {5, 4, 3};
  const Batch c = make_batch(Task::classify, tokens, lengths, {2, 0, 1});
  EXPECT_EQ(c.inputs, (std::vector<int32_t>{10, 13, 15, 11, 14, 12}));
  EXPECT_EQ(c.labels, (std::vector<int32_t>{2, 0, 1}));
  EXPECT_TRUE(c.targets.empty());
  EXPECT_EQ(c.units(), 3);
  EXPECT_EQ(c.tokens(), 6);
  const Batch t = make_batch(Task::tag, tokens, lengths, {-1, 0, 1, 2, -1, -1, 1, 1, -1, -1, 0, -1});
  EXPECT_EQ(t.inputs, c.inputs);
  EXPECT_EQ(t.targets, (std::vector<int32_t>{0, 1, 0, 1, 1, 2}));
  EXPECT_TRUE(t.labels.empty());
  EXPECT_EQ(t.units(), 6);
  const Batch unlabelled = make_batch(Task::classify, tokens, lengths, {});
  EXPECT_EQ(unlabelled.inputs, c.inputs);
  EXPECT_EQ(unlabelled.units(), 0);
  EXPECT_THROW(make_batch(Task::classify, {1, 10, 2, 1, 2}, {3, 2}, {0, 1}), Error);  // nothing inside <s> </s>
  EXPECT_THROW(make_batch(Task::classify, tokens, lengths, {0, 1}), Error);            // a label short
  EXPECT_THROW(make_batch(Task::tag, tokens, lengths, {0, 1, 2}), Error);              // tags short
  EXPECT_THROW(make_batch(Task::lm, tokens, lengths, {0, 1, 2}), Error);               // a language model has no labels
}

TEST(Model, ClassifierShapesAndRefusals) {
  auto backend = make_backend(DeviceType::cpu, 0, 1);
  Model m(*backend, labelled_config(Task::classify, true));
  std::vector<std::string> names;
  for (const ParamSlice& s : m.param_slices()) names.push_back(s.name);
  EXPECT_NE(std::find(names.begin(), names.end(), "lstm.weight_hh_l1_reverse"), names.end());
  const ParamSlice& out = m.param_slices()[m.param_slices().size() - 2];
  EXPECT_EQ(out.name, "classifier.weight");
  EXPECT_EQ(out.shape, (std::vector<int64_t>{3, 8}));  // classes x (2 directions * hidden)
  std::vector<float> h(8), c(8);
  EXPECT_THROW(m.step(0, h, c), Error);
  ModelConfig lm = small_config();
  lm.bidirectional = true;
  EXPECT_THROW(Model(*backend, lm), InputError);
  ModelConfig none = labelled_config(Task::tag, false);
  none.classes = 0;
  EXPECT_THROW(Model(*backend, none), InputError);
}

// A bidirectional tagger on 1, 2 and 3 threads, with dropout: equal losses, gradients and evaluation up to
// float summation order. With two threads the CPU LSTM runs the directions side by side, one thread each;
// with three each direction's units are split over the team (H = 20 leaves a partial vector in a share).
TEST(Model, BidirectionalThreadsAgree) {
  ModelConfig c = labelled_config(Task::tag, true);
  c.hidden = 20, c.layers = 3, c.dropout = 0.25f;
  const std::vector<int64_t> lengths = {12, 9, 9, 5, 3};
  const Batch batch = random_labelled(Task::tag, lengths, c.vocab, c.classes, 47).batch(Task::tag);
  struct Out {
    double loss, eval;
    std::vector<float> grads;
  };
  auto run = [&](int threads) {
    auto backend = make_backend(DeviceType::cpu, 0, threads);
    Model m(*backend, c);
    m.init(6);
    Out o;
    o.loss = m.forward_backward(batch, 0.5f, 9);
    o.grads = download_grads(m);
    o.eval = m.evaluate(batch);
    return o;
  };
  // 1 thread with the weight gradients on BLAS, against 2 and 3 threads with them both ways (the packed
  // weight gradients through the side-by-side lanes too).
  const cpu::WeightGradients by_default = cpu::weight_gradients();
  cpu::set_weight_gradients(cpu::WeightGradients::blas);
  const Out one = run(1);
  for (cpu::WeightGradients how : {cpu::WeightGradients::blas, cpu::WeightGradients::packed})
    for (int threads : {2, 3}) {
      cpu::set_weight_gradients(how);
      const Out t = run(threads);
      const std::string k =
          std::to_string(threads) + " threads, weight gradients " + (how == cpu::WeightGradients::packed ? "packed" : "BLAS");
      EXPECT_NEAR(t.loss, one.loss, 1e-6 * one.loss) << k;
      EXPECT_NEAR(t.eval, one.eval, 1e-6 * one.eval) << k;
      expect_close(t.grads, one.grads, "gradients with " + k);
    }
  cpu::set_weight_gradients(by_default);
}

TEST(Model, ClassifierAndTaggerGradientsMatchFiniteDifferences) {
  auto backend = make_backend(DeviceType::cpu, 0, 1);
  const std::vector<int64_t> lengths = {9, 8, 8, 7, 7, 7, 6, 5, 5, 4, 3, 3};  // enough sequences for sizeable derivatives
  for (bool bi : {false, true}) {
    for (Pool pool : {Pool::last, Pool::mean, Pool::max}) {
      Model m(*backend, labelled_config(Task::classify, bi, pool));
      m.init(3);
      const std::string what = std::string(bi ? "bidirectional" : "unidirectional") + " classifier, pool " + pool_name(pool);
      expect_gradients_match(m, random_labelled(Task::classify, lengths, 7, 3, 41).batch(Task::classify), what);
    }
    Model m(*backend, labelled_config(Task::tag, bi));
    m.init(4);
    expect_gradients_match(m, random_labelled(Task::tag, lengths, 7, 3, 43).batch(Task::tag),
                           bi ? "bidirectional tagger" : "unidirectional tagger");
  }
}

// Gradient accumulation: split_batch cuts a batch into consecutive groups of about equal rows whose
// gradients (and losses), at the batch's scale, add up to the batch's, for every task; asking for more
// parts than sequences gives one per sequence.
TEST(Model, SplitBatchesAddUpToTheBatch) {
  auto backend = make_backend(DeviceType::cpu, 0, 1);
  const std::vector<int64_t> lengths = {9, 8, 8, 7, 6, 5, 5, 4, 3};
  for (Task task : {Task::lm, Task::classify, Task::tag}) {
    Model m(*backend, task == Task::lm ? small_config() : labelled_config(task, true, Pool::mean));
    m.init(5);
    const Batch whole = task == Task::lm ? random_batch(lengths, 7, 51) : random_labelled(task, lengths, 7, 3, 52).batch(task);
    const std::vector<Batch> parts = split_batch(whole, 3);
    ASSERT_EQ(parts.size(), 3u) << task_name(task);
    int64_t rows = 0, units = 0;
    for (const Batch& p : parts) rows += p.tokens(), units += p.units();
    EXPECT_EQ(rows, whole.tokens());
    EXPECT_EQ(units, whole.units());
    // Rows balanced: no part holds more than half the batch's (9 sequences, the longest 7 of 46 rows).
    for (const Batch& p : parts) EXPECT_LE(p.tokens() * 2, whole.tokens()) << task_name(task);
    backend->zero(m.grads().data(), m.grads().numel());
    const double loss = m.forward_backward(whole, 0.25f, 1);
    const std::vector<float> want = download_grads(m);
    backend->zero(m.grads().data(), m.grads().numel());
    double summed = 0;
    for (const Batch& p : parts) summed += m.forward_backward(p, 0.25f, 1);
    const std::vector<float> got = download_grads(m);
    EXPECT_NEAR(summed, loss, 1e-5 * loss) << task_name(task);
    double norm = 0;
    for (size_t i = 0; i < want.size(); ++i) {
      EXPECT_NEAR(got[i], want[i], 1e-6f + 1e-5f * std::abs(want[i])) << task_name(task) << " element " << i;
      norm += std::abs(want[i]);
    }
    EXPECT_GT(norm, 0.0);
    EXPECT_EQ(split_batch(whole, 20).size(), lengths.size());
  }
}

// Each sequence's outputs depend on that sequence alone (the packing, the pooling and the reverse
// direction see no other sequence): a classifier's and a tagger's log-probabilities over a batch equal
// those of each sequence on its own, they are normalised, and evaluate's loss is their NLL of the truth.
TEST(Model, ScoresArePerSequenceAndMatchTheLoss) {
  auto backend = make_backend(DeviceType::cpu, 0, 2);
  const std::vector<int64_t> lengths = {9, 6, 6, 4, 3};
  for (Task task : {Task::classify, Task::tag}) {
    for (Pool pool : {Pool::last, Pool::mean, Pool::max}) {
      if (task == Task::tag && pool != Pool::last) continue;
      Model m(*backend, labelled_config(task, true, pool));
      m.init(9);
      const Labelled l = random_labelled(task, lengths, 7, 3, 47);
      const Batch batch = l.batch(task);
      const std::vector<float> scores = m.log_probs(batch);
      const std::string what = std::string(task_name(task)) + " pool " + pool_name(pool);
      const int64_t O = 3;
      ASSERT_EQ(static_cast<int64_t>(scores.size()), (task == Task::classify ? batch.packing.batch() : batch.tokens()) * O);
      double nll = 0;
      const std::vector<int32_t>& truth = task == Task::classify ? batch.labels : batch.targets;
      for (size_t r = 0; r < truth.size(); ++r) {
        double sum = 0;
        for (int64_t j = 0; j < O; ++j) sum += std::exp(double{scores[r * O + j]});
        EXPECT_NEAR(sum, 1.0, 1e-5) << what << " row " << r;
        nll -= scores[r * O + truth[r]];
      }
      EXPECT_NEAR(m.evaluate(batch), nll, 1e-5 * nll) << what;
      int64_t start = 0;
      for (int b = 0; b < batch.packing.batch(); ++b) {
        const int64_t n = lengths[b];
        const std::vector<int32_t> one(l.tokens.begin() + start, l.tokens.begin() + start + n);
        start += n;
        const std::vector<float> alone = m.log_probs(make_batch(task, one, {n}, {}));
        const Packing single = Packing::from_lengths(std::vector<int>{static_cast<int>(n - 2)});
        for (int t = 0; t < (task == Task::classify ? 1 : n - 2); ++t) {
          const int64_t in_batch = task == Task::classify ? b : batch.packing.row(t, b);
          const int64_t own = task == Task::classify ? 0 : single.row(t, 0);
          for (int64_t j = 0; j < O; ++j)
            EXPECT_NEAR(scores[in_batch * O + j], alone[own * O + j], 1e-5) << what << " sequence " << b << " step " << t;
        }
      }
    }
  }
}

}  // namespace
}  // namespace rnn_dist

// Tests of the CPU reference kernels (cpu_kernels.h): central finite differences in double precision for every
// kernel and for a small embedding -> 2-layer LSTM -> linear -> cross-entropy model, packed-versus-unpacked
// equality, an independent loop implementation, a case worked out by hand, the edge cases of Packing and
// cross_entropy, the thread team (team-parallel kernels and the inference pass equal the serial training
// pass; denormals flushed), the accuracy of the float kernels' fast exp/sigmoid/tanh against double, and
// the CPU backend's name for the OpenBLAS kernels it runs on and its priming of OpenBLAS's buffers.
#include "rnn_dist/cpu/cpu_kernels.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <functional>
#include <iostream>
#include <random>
#include <string>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

#include "rnn_dist/cpu/blas_kernels.h"
#include "rnn_dist/cpu/cpu_backend.h"
#include "rnn_dist/cpu/packed_gemm.h"
#include "rnn_dist/util/error.h"

extern "C" char* openblas_get_corename(void);

namespace rnn_dist::cpu {
namespace {

template <class T>
using Vec = std::vector<T>;

template <class T>
Vec<T> random_vec(size_t n, std::mt19937& rng, double scale = 0.5) {
  std::uniform_real_distribution<double> dist(-scale, scale);
  Vec<T> v(n);
  for (T& e : v) e = static_cast<T>(dist(rng));
  return v;
}

// An empty vector stands for an optional argument left out (nullptr).
template <class T>
const T* ptr(const Vec<T>& v) {
  return v.empty() ? nullptr : v.data();
}

template <class T>
double dot(const Vec<T>& a, const Vec<T>& b) {
  double s = 0;
  for (size_t e = 0; e < a.size(); ++e) s += static_cast<double>(a[e]) * static_cast<double>(b[e]);
  return s;
}

// Max-norm relative comparison: max |got - want| <= tol * max(|got|, |want|).
template <class T>
void expect_close(const std::string& what, const Vec<T>& got, const Vec<T>& want, double tol) {
  ASSERT_EQ(got.size(), want.size()) << what;
  double err = 0, ref = 0;
  for (size_t e = 0; e < got.size(); ++e) {
    const double g = static_cast<double>(got[e]), w = static_cast<double>(want[e]);
    err = std::max(err, std::abs(g - w));
    ref = std::max({ref, std::abs(g), std::abs(w)});
  }
  EXPECT_LE(err, tol * ref) << what << ": max error " << err << " against max magnitude " << ref;
}

// Central differences of loss() w.r.t. each element of v, compared with the analytic gradient.
void expect_gradient(const std::string& what, Vec<double>& v, const Vec<double>& analytic,
                     const std::function<double()>& loss) {
  constexpr double eps = 1e-6, tol = 1e-6;
  ASSERT_EQ(v.size(), analytic.size()) << what;
  Vec<double> numeric(v.size());
  for (size_t e = 0; e < v.size(); ++e) {
    const double saved = v[e];
    v[e] = saved + eps;
    const double up = loss();
    v[e] = saved - eps;
    const double down = loss();
    v[e] = saved;
    numeric[e] = (up - down) / (2 * eps);
  }
  double ref = 0;
  for (double g : numeric) ref = std::max(ref, std::abs(g));
  EXPECT_GT(ref, 0) << what << ": the gradient vanishes, so the comparison would prove nothing";
  expect_close(what, analytic, numeric, tol);
}

// One layer's weights and the gradient buffers its backward pass adds into.
template <class T>
struct Layer {
  int input, hidden;
  Vec<T> w_ih, w_hh, b_ih, b_hh;
  Vec<T> g_w_ih, g_w_hh, g_b_ih, g_b_hh;

  Layer(int input_, int hidden_, std::mt19937& rng)
      : input(input_),
        hidden(hidden_),
        w_ih(random_vec<T>(4 * hidden * input, rng)),
        w_hh(random_vec<T>(4 * hidden * hidden, rng)),
        b_ih(random_vec<T>(4 * hidden, rng)),
        b_hh(random_vec<T>(4 * hidden, rng)),
        g_w_ih(w_ih.size()),
        g_w_hh(w_hh.size()),
        g_b_ih(b_ih.size()),
        g_b_hh(b_hh.size()) {}

  LstmLayerParams<T> params() const { return {w_ih.data(), w_hh.data(), b_ih.data(), b_hh.data(), input, hidden}; }
  LstmLayerGrads<T> grads() { return {g_w_ih.data(), g_w_hh.data(), g_b_ih.data(), g_b_hh.data()}; }
  void fill_grads(T value) {
    for (Vec<T>* g : {&g_w_ih, &g_w_hh, &g_b_ih, &g_b_hh}) std::fill(g->begin(), g->end(), value);
  }
  // (name, weights, gradient) of each tensor.
  std::vector<std::tuple<std::string, Vec<T>*, Vec<T>*>> tensors() {
    return {{"w_ih", &w_ih, &g_w_ih}, {"w_hh", &w_hh, &g_w_hh}, {"b_ih", &b_ih, &g_b_ih}, {"b_hh", &b_hh, &g_b_hh}};
  }
};

// Everything a stack's forward pass produces, per layer.
template <class T>
struct StackForward {
  Vec<Vec<T>> y, hn, cn, cache;
};

// Multi-layer reference: layer l reads layer l-1's output; h0[l], c0[l] empty = zeros.
template <class T>
StackForward<T> stack_forward(const Packing& pk, const std::vector<Layer<T>>& layers, const Vec<T>& x,
                              const Vec<Vec<T>>& h0, const Vec<Vec<T>>& c0) {
  const size_t n = layers.size();
  StackForward<T> f{Vec<Vec<T>>(n), Vec<Vec<T>>(n), Vec<Vec<T>>(n), Vec<Vec<T>>(n)};
  const T* in = x.data();
  for (size_t l = 0; l < n; ++l) {
    const int H = layers[l].hidden;
    f.y[l].resize(pk.rows() * H);
    f.hn[l].resize(pk.batch() * H);
    f.cn[l].resize(pk.batch() * H);
    f.cache[l].resize(lstm_cache_elems(pk.rows(), H));
    lstm_layer_forward(pk, layers[l].params(), in, ptr(h0[l]), ptr(c0[l]), f.y[l].data(), f.hn[l].data(),
                       f.cn[l].data(), lstm_cache_view(f.cache[l].data(), pk.rows(), H));
    in = f.y[l].data();
  }
  return f;
}

template <class T>
struct StackBackward {
  Vec<T> dx;
  Vec<Vec<T>> dh0, dc0;
};

// Backward pass of stack_forward: dy_top, dhn[l], dcn[l] empty = zeros; weight gradients add into layers.
template <class T>
StackBackward<T> stack_backward(const Packing& pk, std::vector<Layer<T>>& layers, const Vec<T>& x,
                                const Vec<Vec<T>>& h0, const Vec<Vec<T>>& c0, StackForward<T>& f,
                                const Vec<T>& dy_top, const Vec<Vec<T>>& dhn, const Vec<Vec<T>>& dcn) {
  const size_t n = layers.size();
  StackBackward<T> r{{}, Vec<Vec<T>>(n), Vec<Vec<T>>(n)};
  Vec<T> dy = dy_top;
  for (size_t l = n; l-- > 0;) {
    Layer<T>& L = layers[l];
    const Vec<T>& in = l > 0 ? f.y[l - 1] : x;
    // Junk, which the kernel must overwrite.
    Vec<T> dx(pk.rows() * L.input, T(1e3));
    r.dh0[l].assign(pk.batch() * L.hidden, T(1e3));
    r.dc0[l].assign(pk.batch() * L.hidden, T(1e3));
    Vec<T> workspace(lstm_backward_workspace_elems(pk.rows(), pk.batch(), L.hidden));
    lstm_layer_backward(pk, L.params(), in.data(), ptr(h0[l]), ptr(c0[l]),
                        lstm_cache_view(f.cache[l].data(), pk.rows(), L.hidden), ptr(dy), ptr(dhn[l]), ptr(dcn[l]),
                        dx.data(), r.dh0[l].data(), r.dc0[l].data(), L.grads(), workspace.data());
    dy = std::move(dx);
  }
  r.dx = std::move(dy);
  return r;
}

TEST(CpuPacking, KnownExample) {
  const std::vector<int> lengths = {5, 3, 3, 1};
  const Packing p = Packing::from_lengths(lengths);
  EXPECT_EQ(p.lengths, lengths);
  EXPECT_EQ(p.batch_sizes, (std::vector<int>{4, 3, 3, 1, 1}));
  EXPECT_EQ(p.step_offset, (std::vector<int64_t>{0, 4, 7, 10, 11, 12}));
  EXPECT_EQ(p.batch(), 4);
  EXPECT_EQ(p.steps(), 5);
  EXPECT_EQ(p.rows(), 12);
  EXPECT_EQ(p.row(2, 1), 8);
  EXPECT_EQ(p.row(4, 0), 11);

  const Packing equal = Packing::from_lengths(std::vector<int>{2, 2});
  EXPECT_EQ(equal.batch_sizes, (std::vector<int>{2, 2}));
  EXPECT_EQ(equal.step_offset, (std::vector<int64_t>{0, 2, 4}));
}

TEST(CpuPacking, RejectsBadLengths) {
  EXPECT_THROW(Packing::from_lengths(std::vector<int>{3, 5, 1}), Error);
  EXPECT_THROW(Packing::from_lengths(std::vector<int>{2, 0}), Error);
  EXPECT_THROW(Packing::from_lengths(std::vector<int>{0}), Error);
  EXPECT_THROW(Packing::from_lengths(std::vector<int>{3, -1}), Error);
  EXPECT_THROW(Packing::from_lengths(std::vector<int>{}), Error);
}

TEST(CpuGemm, AllTransposesWithStrides) {
  std::mt19937 rng(7);
  const int m = 3, n = 4, k = 5;
  const double alpha = 0.7, beta = -1.3;
  for (bool ta : {false, true}) {
    for (bool tb : {false, true}) {
      // Leading dimensions wider than the matrices, to catch a kernel that ignores them.
      const int a_rows = ta ? k : m, a_cols = ta ? m : k, lda = a_cols + 2;
      const int b_rows = tb ? n : k, b_cols = tb ? k : n, ldb = b_cols + 1;
      const int ldc = n + 3;
      const Vec<double> a = random_vec<double>(a_rows * lda, rng), b = random_vec<double>(b_rows * ldb, rng);
      Vec<double> c = random_vec<double>(m * ldc, rng);
      Vec<double> want = c;
      for (int i = 0; i < m; ++i)
        for (int j = 0; j < n; ++j) {
          double s = 0;
          for (int p = 0; p < k; ++p)
            s += (ta ? a[p * lda + i] : a[i * lda + p]) * (tb ? b[j * ldb + p] : b[p * ldb + j]);
          want[i * ldc + j] = alpha * s + beta * c[i * ldc + j];
        }
      gemm<double>(ta, tb, m, n, k, alpha, a.data(), lda, b.data(), ldb, beta, c.data(), ldc);
      expect_close("gemm ta=" + std::to_string(ta) + " tb=" + std::to_string(tb), c, want, 1e-14);
    }
  }
}

// One step with H = I = 1, with pre-activations chosen so that every value has a closed form:
// sigmoid(ln 3) = 3/4, sigmoid(0) = 1/2, sigmoid(-ln 3) = 1/4, tanh(ln 2) = 3/5.
TEST(CpuLstmLayer, HandWorkedSingleStep) {
  const double ln2 = std::log(2.0), ln3 = std::log(3.0);
  // With x = 2, h0 = -1 the pre-activations 2 w_ih - w_hh + b_ih + b_hh are ln 3, 0, ln 2, -ln 3.
  const Vec<double> w_ih = {ln3 / 2, 0.25, ln2 / 2, 0}, w_hh = {0, 0.5, 0, ln3};
  const Vec<double> b_ih = {0.1, 0, 0, 0}, b_hh = {-0.1, 0, 0, 0};
  const double x = 2, h0 = -1, c0 = 2 * ln2 - 0.9;  // so that c = c0/2 + (3/4)(3/5) = ln 2
  const LstmLayerParams<double> p{w_ih.data(), w_hh.data(), b_ih.data(), b_hh.data(), 1, 1};
  const Packing pk = Packing::from_lengths(std::vector<int>{1});

  Vec<double> cache(lstm_cache_elems(1, 1));
  const LstmLayerCache<double> view = lstm_cache_view(cache.data(), 1, 1);
  double y = 0, hn = 0, cn = 0;
  lstm_layer_forward(pk, p, &x, &h0, &c0, &y, &hn, &cn, view);
  EXPECT_NEAR(view.gates[0], 0.75, 1e-15);
  EXPECT_NEAR(view.gates[1], 0.5, 1e-15);
  EXPECT_NEAR(view.gates[2], 0.6, 1e-15);
  EXPECT_NEAR(view.gates[3], 0.25, 1e-15);
  EXPECT_NEAR(cn, ln2, 1e-15);
  EXPECT_NEAR(y, 0.15, 1e-15);  // (1/4) tanh(ln 2)
  EXPECT_EQ(hn, y);

  // Loss = y: dc = o (1 - tanh^2 c) = 0.16; pre-activation gradients follow from each gate's derivative.
  const double d_i = 0.16 * 0.6 * 0.75 * 0.25, d_f = 0.16 * c0 * 0.25, d_g = 0.16 * 0.75 * (1 - 0.36),
               d_o = 0.6 * 0.25 * 0.75;
  const Vec<double> dpre = {d_i, d_f, d_g, d_o};
  Vec<double> gw_ih(4), gw_hh(4), gb_ih(4), gb_hh(4), workspace(lstm_backward_workspace_elems(1, 1, 1));
  const double dy = 1;
  double dx = 0, dh0 = 0, dc0 = 0;
  lstm_layer_backward(pk, p, &x, &h0, &c0, view, &dy, nullptr, nullptr, &dx, &dh0, &dc0,
                      LstmLayerGrads<double>{gw_ih.data(), gw_hh.data(), gb_ih.data(), gb_hh.data()}, workspace.data());
  for (int k = 0; k < 4; ++k) {
    EXPECT_NEAR(gw_ih[k], dpre[k] * x, 1e-15) << "gate " << k;
    EXPECT_NEAR(gw_hh[k], dpre[k] * h0, 1e-15) << "gate " << k;
    EXPECT_NEAR(gb_ih[k], dpre[k], 1e-15) << "gate " << k;
    EXPECT_NEAR(gb_hh[k], dpre[k], 1e-15) << "gate " << k;
  }
  EXPECT_NEAR(dx, d_i * ln3 / 2 + d_f * 0.25 + d_g * ln2 / 2, 1e-15);
  EXPECT_NEAR(dh0, d_f * 0.5 + d_o * ln3, 1e-15);
  EXPECT_NEAR(dc0, 0.16 * 0.5, 1e-15);
}

// The PyTorch nn.LSTM formulas written as plain loops over one sequence (x: len x I); h, c carry the state.
Vec<double> naive_lstm(const Layer<double>& L, const Vec<double>& x, Vec<double>& h, Vec<double>& c) {
  const int I = L.input, H = L.hidden, len = static_cast<int>(x.size()) / I;
  auto sigmoid = [](double v) { return 1 / (1 + std::exp(-v)); };
  Vec<double> y;
  for (int t = 0; t < len; ++t) {
    Vec<double> pre(4 * H);
    for (int k = 0; k < 4 * H; ++k) {
      pre[k] = L.b_ih[k] + L.b_hh[k];
      for (int i = 0; i < I; ++i) pre[k] += L.w_ih[k * I + i] * x[t * I + i];
      for (int j = 0; j < H; ++j) pre[k] += L.w_hh[k * H + j] * h[j];
    }
    for (int j = 0; j < H; ++j) {
      c[j] = sigmoid(pre[H + j]) * c[j] + sigmoid(pre[j]) * std::tanh(pre[2 * H + j]);
      h[j] = sigmoid(pre[3 * H + j]) * std::tanh(c[j]);
      y.push_back(h[j]);
    }
  }
  return y;
}

TEST(CpuLstmLayer, ForwardMatchesPlainLoops) {
  std::mt19937 rng(11);
  const std::vector<int> lengths = {4, 4, 2, 1};
  const Packing pk = Packing::from_lengths(lengths);
  const int I = 3, H = 5, B = pk.batch();
  const Layer<double> L(I, H, rng);
  const Vec<double> x = random_vec<double>(pk.rows() * I, rng, 1.0), h0 = random_vec<double>(B * H, rng),
                    c0 = random_vec<double>(B * H, rng);
  Vec<double> y(pk.rows() * H), hn(B * H), cn(B * H), cache(lstm_cache_elems(pk.rows(), H));
  lstm_layer_forward(pk, L.params(), x.data(), h0.data(), c0.data(), y.data(), hn.data(), cn.data(),
                     lstm_cache_view(cache.data(), pk.rows(), H));

  Vec<double> want_y(y.size()), want_hn, want_cn;
  for (int b = 0; b < B; ++b) {
    Vec<double> xb;
    for (int t = 0; t < lengths[b]; ++t)
      xb.insert(xb.end(), x.begin() + pk.row(t, b) * I, x.begin() + (pk.row(t, b) + 1) * I);
    Vec<double> h(h0.begin() + b * H, h0.begin() + (b + 1) * H), c(c0.begin() + b * H, c0.begin() + (b + 1) * H);
    const Vec<double> yb = naive_lstm(L, xb, h, c);
    for (int t = 0; t < lengths[b]; ++t)
      std::copy_n(yb.begin() + t * H, H, want_y.begin() + pk.row(t, b) * H);
    want_hn.insert(want_hn.end(), h.begin(), h.end());
    want_cn.insert(want_cn.end(), c.begin(), c.end());
  }
  expect_close("y", y, want_y, 1e-14);
  expect_close("hn", hn, want_hn, 1e-14);
  expect_close("cn", cn, want_cn, 1e-14);
}

// Loss = sum of random coefficients times the top layer's y and every layer's hn and cn.
TEST(CpuLstmLayer, TwoLayerFiniteDifferences) {
  std::mt19937 rng(1);
  const Packing pk = Packing::from_lengths(std::vector<int>{5, 3, 3, 1});
  const int I = 3, H = 4, B = pk.batch();
  std::vector<Layer<double>> layers{Layer<double>(I, H, rng), Layer<double>(H, H, rng)};
  Vec<double> x = random_vec<double>(pk.rows() * I, rng, 1.0);
  Vec<Vec<double>> h0, c0, chn, ccn;
  for (int l = 0; l < 2; ++l) {
    h0.push_back(random_vec<double>(B * H, rng));
    c0.push_back(random_vec<double>(B * H, rng));
    chn.push_back(random_vec<double>(B * H, rng, 1.0));
    ccn.push_back(random_vec<double>(B * H, rng, 1.0));
  }
  const Vec<double> cy = random_vec<double>(pk.rows() * H, rng, 1.0);

  auto loss = [&] {
    const StackForward<double> f = stack_forward(pk, layers, x, h0, c0);
    double s = dot(cy, f.y.back());
    for (int l = 0; l < 2; ++l) s += dot(chn[l], f.hn[l]) + dot(ccn[l], f.cn[l]);
    return s;
  };
  StackForward<double> f = stack_forward(pk, layers, x, h0, c0);
  const StackBackward<double> g = stack_backward(pk, layers, x, h0, c0, f, cy, chn, ccn);

  expect_gradient("x", x, g.dx, loss);
  for (int l = 0; l < 2; ++l) {
    const std::string layer = "layer " + std::to_string(l) + " ";
    expect_gradient(layer + "h0", h0[l], g.dh0[l], loss);
    expect_gradient(layer + "c0", c0[l], g.dc0[l], loss);
    for (auto& [name, w, dw] : layers[l].tensors()) expect_gradient(layer + name, *w, *dw, loss);
  }
}

// A layer with a projection (nn.LSTM(proj_size=P)): h_t = W_hr (o_t * tanh(c_t)), P wide, is the output and
// the recurrent input. Its forward pass equals plain loops, one sequence at a time (also on a team of 3,
// and through the inference pass); its backward pass equals central differences in double of a loss over
// y, hn and cn, for x, both states and every weight, W_hr included.
TEST(CpuLstmLayer, ProjectionMatchesPlainLoopsAndFiniteDifferences) {
  std::mt19937 rng(23);
  const std::vector<int> lengths = {5, 4, 2, 2, 1};
  const Packing pk = Packing::from_lengths(lengths);
  const int I = 3, H = 5, P = 2, B = pk.batch();
  const int64_t R = pk.rows();
  Vec<double> w_ih = random_vec<double>(4 * H * I, rng), w_hh = random_vec<double>(4 * H * P, rng),
              b_ih = random_vec<double>(4 * H, rng), b_hh = random_vec<double>(4 * H, rng),
              w_hr = random_vec<double>(P * H, rng, 0.8);
  Vec<double> x = random_vec<double>(R * I, rng, 1.0), h0 = random_vec<double>(B * P, rng),
              c0 = random_vec<double>(B * H, rng);
  auto params = [&] {
    LstmLayerParams<double> p{w_ih.data(), w_hh.data(), b_ih.data(), b_hh.data(), I, H};
    p.w_hr = w_hr.data();
    p.proj = P;
    return p;
  };
  struct Out {
    Vec<double> y, hn, cn, cache;
  };
  auto forward = [&](Team* team) {
    Out o{Vec<double>(R * P), Vec<double>(B * P), Vec<double>(B * H), Vec<double>(lstm_cache_elems(R, H, P))};
    lstm_layer_forward(pk, params(), x.data(), h0.data(), c0.data(), o.y.data(), o.hn.data(), o.cn.data(),
                       lstm_cache_view(o.cache.data(), R, H, P), team);
    return o;
  };
  const Out f = forward(nullptr);
  // Plain loops.
  auto sigmoid = [](double v) { return 1 / (1 + std::exp(-v)); };
  Vec<double> want_y(R * P), want_hn(B * P), want_cn(B * H);
  for (int b = 0; b < B; ++b) {
    Vec<double> h(h0.begin() + b * P, h0.begin() + (b + 1) * P), c(c0.begin() + b * H, c0.begin() + (b + 1) * H);
    for (int t = 0; t < lengths[b]; ++t) {
      const double* xt = x.data() + pk.row(t, b) * I;
      Vec<double> pre(4 * H), mt(H);
      for (int k = 0; k < 4 * H; ++k) {
        pre[k] = b_ih[k] + b_hh[k];
        for (int i = 0; i < I; ++i) pre[k] += w_ih[k * I + i] * xt[i];
        for (int q = 0; q < P; ++q) pre[k] += w_hh[k * P + q] * h[q];
      }
      for (int j = 0; j < H; ++j) {
        c[j] = sigmoid(pre[H + j]) * c[j] + sigmoid(pre[j]) * std::tanh(pre[2 * H + j]);
        mt[j] = sigmoid(pre[3 * H + j]) * std::tanh(c[j]);
      }
      for (int q = 0; q < P; ++q) {
        h[q] = 0;
        for (int j = 0; j < H; ++j) h[q] += w_hr[q * H + j] * mt[j];
        want_y[pk.row(t, b) * P + q] = h[q];
      }
    }
    std::copy(h.begin(), h.end(), want_hn.begin() + b * P);
    std::copy(c.begin(), c.end(), want_cn.begin() + b * H);
  }
  expect_close("projected y", f.y, want_y, 1e-14);
  expect_close("projected hn", f.hn, want_hn, 1e-14);
  expect_close("projected cn", f.cn, want_cn, 1e-14);
  Team team(3);
  const Out threaded = forward(&team);
  expect_close("projected y, team of 3", threaded.y, f.y, 1e-15);
  Vec<double> iy(R * P), ihn(B * P), icn(B * H), iws(lstm_inference_workspace_elems(R, B, H, P));
  lstm_layer_inference(pk, params(), x.data(), h0.data(), c0.data(), iy.data(), ihn.data(), icn.data(), iws.data());
  expect_close("projected y, inference", iy, f.y, 1e-15);
  expect_close("projected cn, inference", icn, f.cn, 1e-15);

  const Vec<double> cy = random_vec<double>(R * P, rng, 1.0), chn = random_vec<double>(B * P, rng, 1.0),
                    ccn = random_vec<double>(B * H, rng, 1.0);
  auto loss = [&] {
    const Out o = forward(nullptr);
    return dot(cy, o.y) + dot(chn, o.hn) + dot(ccn, o.cn);
  };
  for (Team* t : {static_cast<Team*>(nullptr), &team}) {
    Out o = forward(t);
    Vec<double> g_w_ih(w_ih.size()), g_w_hh(w_hh.size()), g_b_ih(b_ih.size()), g_b_hh(b_hh.size()), g_w_hr(w_hr.size());
    Vec<double> dx(R * I, 1e3), dh0(B * P, 1e3), dc0(B * H, 1e3), ws(lstm_backward_workspace_elems(R, B, H, P));
    LstmLayerGrads<double> grads{g_w_ih.data(), g_w_hh.data(), g_b_ih.data(), g_b_hh.data()};
    grads.w_hr = g_w_hr.data();
    lstm_layer_backward(pk, params(), x.data(), h0.data(), c0.data(), lstm_cache_view(o.cache.data(), R, H, P),
                        cy.data(), chn.data(), ccn.data(), dx.data(), dh0.data(), dc0.data(), grads, ws.data(), t);
    const std::string on = t ? " (team of 3)" : "";
    expect_gradient("x" + on, x, dx, loss);
    expect_gradient("h0" + on, h0, dh0, loss);
    expect_gradient("c0" + on, c0, dc0, loss);
    expect_gradient("w_ih" + on, w_ih, g_w_ih, loss);
    expect_gradient("w_hh" + on, w_hh, g_w_hh, loss);
    expect_gradient("b_ih" + on, b_ih, g_b_ih, loss);
    expect_gradient("b_hh" + on, b_hh, g_b_hh, loss);
    expect_gradient("w_hr" + on, w_hr, g_w_hr, loss);
  }
}

// Left-out optional arguments (nullptr) behave as zeros, and skipping dx/dh0/dc0 changes no weight gradient.
TEST(CpuLstmLayer, NullptrMeansZero) {
  std::mt19937 rng(5);
  const Packing pk = Packing::from_lengths(std::vector<int>{3, 2, 2});
  const int I = 2, H = 3, B = pk.batch();
  const Vec<double> x = random_vec<double>(pk.rows() * I, rng, 1.0), dy = random_vec<double>(pk.rows() * H, rng),
                    dhn = random_vec<double>(B * H, rng), dcn = random_vec<double>(B * H, rng),
                    zero_state(B * H), zero_y(pk.rows() * H);
  struct Result {
    Vec<double> y, hn, cn, dx, dh0, dc0, grads;
  };
  auto run = [&](const Vec<double>& h0, const Vec<double>& c0, const Vec<double>& dy_, const Vec<double>& dhn_,
                 const Vec<double>& dcn_, bool input_grads) {
    std::mt19937 same(9);
    Layer<double> L(I, H, same);
    Result r{Vec<double>(pk.rows() * H), Vec<double>(B * H), Vec<double>(B * H), {}, {}, {}, {}};
    Vec<double> cache(lstm_cache_elems(pk.rows(), H)), ws(lstm_backward_workspace_elems(pk.rows(), B, H));
    const LstmLayerCache<double> view = lstm_cache_view(cache.data(), pk.rows(), H);
    lstm_layer_forward(pk, L.params(), x.data(), ptr(h0), ptr(c0), r.y.data(), r.hn.data(), r.cn.data(), view);
    if (input_grads) {
      r.dx.resize(pk.rows() * I);
      r.dh0.resize(B * H);
      r.dc0.resize(B * H);
    }
    lstm_layer_backward(pk, L.params(), x.data(), ptr(h0), ptr(c0), view, ptr(dy_), ptr(dhn_), ptr(dcn_),
                        r.dx.empty() ? nullptr : r.dx.data(), r.dh0.empty() ? nullptr : r.dh0.data(),
                        r.dc0.empty() ? nullptr : r.dc0.data(), L.grads(), ws.data());
    for (auto& [name, w, dw] : L.tensors()) r.grads.insert(r.grads.end(), dw->begin(), dw->end());
    return r;
  };
  auto expect_same = [](const Result& a, const Result& b, const std::string& what) {
    expect_close(what + ": y", a.y, b.y, 1e-15);
    expect_close(what + ": hn", a.hn, b.hn, 1e-15);
    expect_close(what + ": cn", a.cn, b.cn, 1e-15);
    expect_close(what + ": weight gradients", a.grads, b.grads, 1e-15);
    if (!a.dx.empty() && !b.dx.empty()) {
      expect_close(what + ": dx", a.dx, b.dx, 1e-15);
      expect_close(what + ": dh0", a.dh0, b.dh0, 1e-15);
      expect_close(what + ": dc0", a.dc0, b.dc0, 1e-15);
    }
  };
  const Vec<double> none;
  expect_same(run(none, none, dy, none, none, true), run(zero_state, zero_state, dy, zero_state, zero_state, true),
              "null h0, c0, dhn, dcn");
  expect_same(run(none, none, none, dhn, dcn, true), run(none, none, zero_y, dhn, dcn, true), "null dy");
  expect_same(run(none, none, dy, dhn, dcn, false), run(none, none, dy, dhn, dcn, true), "null dx, dh0, dc0");
}

template <class T>
class CpuLstmPacking : public ::testing::Test {};
using Scalars = ::testing::Types<float, double>;
TYPED_TEST_SUITE(CpuLstmPacking, Scalars);

// Running each sequence alone gives the packed batch's outputs, states and input gradients, and the weight
// gradients summed over the sequences (which also checks that weight gradients accumulate).
TYPED_TEST(CpuLstmPacking, PackedEqualsUnpacked) {
  using T = TypeParam;
  const double tol = std::is_same_v<T, float> ? 1e-5 : 1e-13;
  std::mt19937 rng(3);
  const std::vector<int> lengths = {6, 4, 4, 2, 1};
  const Packing pk = Packing::from_lengths(lengths);
  const int I = 3, H = 5, B = pk.batch(), n = 2;
  std::vector<Layer<T>> packed_layers{Layer<T>(I, H, rng), Layer<T>(H, H, rng)};
  for (Layer<T>& L : packed_layers) L.fill_grads(T(0.25));
  std::vector<Layer<T>> single_layers = packed_layers;

  const Vec<T> x = random_vec<T>(pk.rows() * I, rng, 1.0), dy = random_vec<T>(pk.rows() * H, rng);
  Vec<Vec<T>> h0, c0, dhn, dcn;
  for (int l = 0; l < n; ++l)
    for (Vec<Vec<T>>* v : {&h0, &c0, &dhn, &dcn}) v->push_back(random_vec<T>(B * H, rng));

  StackForward<T> pf = stack_forward(pk, packed_layers, x, h0, c0);
  const StackBackward<T> pb = stack_backward(pk, packed_layers, x, h0, c0, pf, dy, dhn, dcn);

  // The single-sequence results, gathered into the packed layout.
  StackForward<T> sf{Vec<Vec<T>>(n, Vec<T>(pk.rows() * H)), Vec<Vec<T>>(n), Vec<Vec<T>>(n), {}};
  StackBackward<T> sb{Vec<T>(pk.rows() * I), Vec<Vec<T>>(n), Vec<Vec<T>>(n)};
  for (int b = 0; b < B; ++b) {
    const Packing one = Packing::from_lengths(std::vector<int>{lengths[b]});
    // Rows of sequence b of a packed tensor with `width` columns.
    auto rows_of = [&](const Vec<T>& packed, int width) {
      Vec<T> out;
      for (int t = 0; t < lengths[b]; ++t)
        out.insert(out.end(), packed.begin() + pk.row(t, b) * width, packed.begin() + (pk.row(t, b) + 1) * width);
      return out;
    };
    auto put_rows = [&](const Vec<T>& seq, int width, Vec<T>& packed) {
      for (int t = 0; t < lengths[b]; ++t)
        std::copy_n(seq.begin() + t * width, width, packed.begin() + pk.row(t, b) * width);
    };
    auto state_of = [&](const Vec<Vec<T>>& v) {
      Vec<Vec<T>> out;
      for (const Vec<T>& s : v) out.emplace_back(s.begin() + b * H, s.begin() + (b + 1) * H);
      return out;
    };
    const Vec<T> xb = rows_of(x, I);
    const Vec<Vec<T>> h0b = state_of(h0), c0b = state_of(c0);
    StackForward<T> f = stack_forward(one, single_layers, xb, h0b, c0b);
    StackBackward<T> g = stack_backward(one, single_layers, xb, h0b, c0b, f, rows_of(dy, H), state_of(dhn),
                                        state_of(dcn));
    put_rows(g.dx, I, sb.dx);
    for (int l = 0; l < n; ++l) {
      put_rows(f.y[l], H, sf.y[l]);
      for (auto [from, to] : {std::pair{&f.hn, &sf.hn}, {&f.cn, &sf.cn}, {&g.dh0, &sb.dh0}, {&g.dc0, &sb.dc0}})
        (*to)[l].insert((*to)[l].end(), (*from)[l].begin(), (*from)[l].end());
    }
  }

  expect_close("dx", sb.dx, pb.dx, tol);
  for (int l = 0; l < n; ++l) {
    const std::string layer = "layer " + std::to_string(l) + " ";
    expect_close(layer + "y", sf.y[l], pf.y[l], tol);
    expect_close(layer + "hn", sf.hn[l], pf.hn[l], tol);
    expect_close(layer + "cn", sf.cn[l], pf.cn[l], tol);
    expect_close(layer + "dh0", sb.dh0[l], pb.dh0[l], tol);
    expect_close(layer + "dc0", sb.dc0[l], pb.dc0[l], tol);
    auto single = single_layers[l].tensors(), packed = packed_layers[l].tensors();
    for (size_t k = 0; k < single.size(); ++k)
      expect_close(layer + "d" + std::get<0>(single[k]), *std::get<2>(single[k]), *std::get<2>(packed[k]), tol);
  }
}

TEST(CpuEmbedding, ForwardAndFiniteDifferences) {
  std::mt19937 rng(2);
  const int V = 5, E = 3;
  const std::vector<int32_t> ids = {1, 3, 1, 0, 1, 4};  // repeated ids; id 2 unused
  const int64_t rows = static_cast<int64_t>(ids.size());
  Vec<double> table = random_vec<double>(V * E, rng);
  const Vec<double> coef = random_vec<double>(rows * E, rng, 1.0);
  Vec<double> out(rows * E);
  embedding_forward(ids.data(), rows, table.data(), E, out.data());
  for (int64_t r = 0; r < rows; ++r)
    for (int k = 0; k < E; ++k) EXPECT_EQ(out[r * E + k], table[ids[r] * E + k]) << "row " << r;

  Vec<double> dtable(V * E);
  embedding_backward(ids.data(), rows, coef.data(), E, dtable.data());
  expect_gradient("table", table, dtable, [&] {
    embedding_forward(ids.data(), rows, table.data(), E, out.data());
    return dot(coef, out);
  });
  // A second call adds the same gradient again.
  Vec<double> twice = dtable;
  embedding_backward(ids.data(), rows, coef.data(), E, twice.data());
  for (double& g : dtable) g *= 2;
  expect_close("accumulated dtable", twice, dtable, 1e-15);
}

TEST(CpuLinear, ForwardAndFiniteDifferences) {
  std::mt19937 rng(4);
  const int rows = 4, in = 3, out = 5;
  Vec<double> x = random_vec<double>(rows * in, rng, 1.0), w = random_vec<double>(out * in, rng),
              b = random_vec<double>(out, rng);
  const Vec<double> coef = random_vec<double>(rows * out, rng, 1.0);
  Vec<double> y(rows * out);
  linear_forward(x.data(), rows, in, w.data(), b.data(), out, y.data());
  Vec<double> want(rows * out);
  for (int r = 0; r < rows; ++r)
    for (int o = 0; o < out; ++o) {
      want[r * out + o] = b[o];
      for (int i = 0; i < in; ++i) want[r * out + o] += x[r * in + i] * w[o * in + i];
    }
  expect_close("y", y, want, 1e-15);

  Vec<double> dx(rows * in, 1e3), dw(out * in), db(out);  // dx holds junk the kernel must overwrite
  linear_backward(x.data(), rows, in, w.data(), out, coef.data(), dx.data(), dw.data(), db.data());
  auto loss = [&] {
    linear_forward(x.data(), rows, in, w.data(), b.data(), out, y.data());
    return dot(coef, y);
  };
  expect_gradient("x", x, dx, loss);
  expect_gradient("w", w, dw, loss);
  expect_gradient("b", b, db, loss);
}

TEST(CpuCrossEntropy, FiniteDifferences) {
  std::mt19937 rng(6);
  const int rows = 4, V = 6;
  const double scale = 0.25;
  const std::vector<int32_t> targets = {2, 0, 5, 2};
  Vec<double> logits = random_vec<double>(rows * V, rng, 3.0), dlogits(rows * V);
  cross_entropy(logits.data(), rows, V, targets.data(), dlogits.data(), scale);
  expect_gradient("logits", logits, dlogits,
                  [&] { return scale * cross_entropy<double>(logits.data(), rows, V, targets.data(), nullptr, 1); });
}

TEST(CpuCrossEntropy, MatchesDirectLogSumExp) {
  std::mt19937 rng(8);
  const int rows = 3, V = 5;
  const double scale = 0.5;
  const std::vector<int32_t> targets = {4, 0, 2};
  const Vec<double> logits = random_vec<double>(rows * V, rng, 2.0);
  Vec<double> dlogits(rows * V);
  const double loss = cross_entropy(logits.data(), rows, V, targets.data(), dlogits.data(), scale);
  double want = 0;
  for (int r = 0; r < rows; ++r) {
    double sum = 0;
    for (int k = 0; k < V; ++k) sum += std::exp(logits[r * V + k]);
    want += std::log(sum) - logits[r * V + targets[r]];
    for (int k = 0; k < V; ++k)
      EXPECT_NEAR(dlogits[r * V + k], (std::exp(logits[r * V + k]) / sum - (k == targets[r])) * scale, 1e-15);
  }
  EXPECT_NEAR(loss, want, 1e-13);
}

template <class T>
class CpuCrossEntropyTyped : public ::testing::Test {};
TYPED_TEST_SUITE(CpuCrossEntropyTyped, Scalars);

// exp(1000) overflows even in double; the row max must be subtracted first.
TYPED_TEST(CpuCrossEntropyTyped, StableForLargeLogits) {
  using T = TypeParam;
  const Vec<T> logits = {1000, 999, 998, -1000, -1000, -1000, -1000, -1000};
  const std::vector<int32_t> targets = {1, 2};
  Vec<T> dlogits(logits.size());
  const double loss = cross_entropy(logits.data(), 2, 4, targets.data(), dlogits.data(), T(1));
  const double s = 1 + std::exp(-1.0) + std::exp(-2.0);  // row 0 relative to its max; exp(-2000) vanishes
  // Float takes its exponentials in float (about 2e-7 relative), double in double.
  EXPECT_NEAR(loss, (1 + std::log(s)) + std::log(4.0), (std::is_same_v<T, float> ? 1e-6 : 1e-12));
  const double want[8] = {1 / s, std::exp(-1.0) / s - 1, std::exp(-2.0) / s, 0, 0.25, 0.25, -0.75, 0.25};
  for (int k = 0; k < 8; ++k) EXPECT_NEAR(static_cast<double>(dlogits[k]), want[k], 1e-7) << "element " << k;
}

TEST(CpuCrossEntropy, GradientMayAliasLogits) {
  std::mt19937 rng(10);
  const int rows = 3, V = 7;
  const std::vector<int32_t> targets = {6, 3, 0};
  Vec<float> logits = random_vec<float>(rows * V, rng, 4.0), separate(rows * V);
  const double loss = cross_entropy(logits.data(), rows, V, targets.data(), separate.data(), 0.5f);
  EXPECT_EQ(cross_entropy(logits.data(), rows, V, targets.data(), logits.data(), 0.5f), loss);
  EXPECT_EQ(logits, separate);
}

TEST(CpuCrossEntropy, RejectsTargetOutsideVocab) {
  const Vec<double> logits(6);
  for (int32_t bad : {-1, 3}) {
    const std::vector<int32_t> targets = {0, bad};
    EXPECT_THROW(cross_entropy<double>(logits.data(), 2, 3, targets.data(), nullptr, 1), Error) << bad;
  }
}

TEST(CpuApplyMask, MultipliesElementwiseInPlace) {
  Vec<float> x = {1, -2, 3, 4};
  const Vec<float> mask = {0, 2, 2, 0};
  Vec<float> y(4);
  apply_mask(x.data(), mask.data(), 4, y.data());
  EXPECT_EQ(y, (Vec<float>{0, -4, 6, 0}));
  apply_mask(x.data(), mask.data(), 4, x.data());
  EXPECT_EQ(x, y);
}

// share() covers [0, n) exactly, in order, with aligned boundaries and nearly equal parts.
TEST(CpuTeam, ShareSplitsExactly) {
  for (int64_t n : {0, 1, 7, 8, 20, 256, 1001})
    for (int parts : {1, 2, 3, 5})
      for (int64_t align : {1, 8}) {
        int64_t next = 0;
        for (int m = 0; m < parts; ++m) {
          const auto [b, e] = share(n, parts, m, align);
          EXPECT_EQ(b, next) << n << " " << parts << " " << m;
          EXPECT_LE(b, e);
          if (e < n) {
            EXPECT_EQ(e % align, 0);
          }
          EXPECT_LE(e - b, (n + parts * align - 1) / parts + align);
          next = e;
        }
        EXPECT_EQ(next, n);
      }
}

// Every member runs, barriers order the members' writes, and a member's exception reaches the caller.
TEST(CpuTeam, RunBarrierAndErrors) {
  Team team(3);
  ASSERT_EQ(team.size(), 3);
  for (int round = 0; round < 50; ++round) {
    std::vector<int> a(3, 0), b(3, 0);
    team.run([&](int m) {
      a[m] = round + m;
      team.barrier();
      b[m] = a[(m + 1) % 3];  // written by another member before the barrier
    });
    for (int m = 0; m < 3; ++m) EXPECT_EQ(b[m], round + (m + 1) % 3);
  }
  EXPECT_THROW(team.run([](int m) {
    if (m == 2) throw Error("member 2 failed");
  }),
               Error);
  int ran = 0;
  team.run([&](int m) {
    if (m == 0) ran = 1;
  });
  EXPECT_EQ(ran, 1);
}

// Every member, the constructing thread included, flushes denormal results to zero: gradients decaying
// through time made classifier training 8x slower without it.
TEST(CpuTeam, MembersFlushDenormalsToZero) {
#if !defined(__SSE__)
  GTEST_SKIP() << "flushing denormals is only set on x86 (SSE)";
#endif
  Team team(3);
  std::vector<float> halved(3, -1.0f);
  team.run([&](int m) {
    volatile float smallest_normal = 1.17549435e-38f;
    halved[m] = smallest_normal * 0.5f;  // a denormal unless flushed
  });
  for (int m = 0; m < 3; ++m) EXPECT_EQ(halved[m], 0.0f) << "member " << m;
}

// The team-parallel kernels give the serial results (double, so only summation order could differ), with
// a hidden size whose split leaves a partial vector, and the inference pass gives the training forward's.
TEST(CpuTeam, ThreadedKernelsEqualSerial) {
  std::mt19937 rng(21);
  const Packing pk = Packing::from_lengths(std::vector<int>{9, 7, 7, 4, 1});
  const int I = 5, H = 19, B = pk.batch(), V = 11;
  const Layer<double> base(I, H, rng);
  const Vec<double> x = random_vec<double>(pk.rows() * I, rng, 1.0), h0 = random_vec<double>(B * H, rng),
                    c0 = random_vec<double>(B * H, rng), dy = random_vec<double>(pk.rows() * H, rng),
                    dhn = random_vec<double>(B * H, rng), dcn = random_vec<double>(B * H, rng),
                    w = random_vec<double>(V * H, rng), bias = random_vec<double>(V, rng);
  std::vector<int32_t> ids(pk.rows()), targets(pk.rows());
  for (int64_t r = 0; r < pk.rows(); ++r) ids[r] = int32_t(r * 5 % V), targets[r] = int32_t(r * 3 % V);
  struct Out {
    Vec<double> y, hn, cn, dx, dh0, dc0, grads, y_infer, hn_infer, cn_infer, logits, dlogits, dhid, dw, db, emb,
        dtable;
    double loss = 0;
  };
  auto run = [&](Team* team) {
    Layer<double> L = base;
    Out o;
    o.y.resize(pk.rows() * H), o.hn.resize(B * H), o.cn.resize(B * H), o.dx.resize(pk.rows() * I);
    o.dh0.resize(B * H), o.dc0.resize(B * H);
    Vec<double> cache(lstm_cache_elems(pk.rows(), H)), ws(lstm_backward_workspace_elems(pk.rows(), B, H));
    const LstmLayerCache<double> view = lstm_cache_view(cache.data(), pk.rows(), H);
    lstm_layer_forward(pk, L.params(), x.data(), h0.data(), c0.data(), o.y.data(), o.hn.data(), o.cn.data(), view,
                       team);
    lstm_layer_backward(pk, L.params(), x.data(), h0.data(), c0.data(), view, dy.data(), dhn.data(), dcn.data(),
                        o.dx.data(), o.dh0.data(), o.dc0.data(), L.grads(), ws.data(), team);
    for (auto& [name, p, dp] : L.tensors()) o.grads.insert(o.grads.end(), dp->begin(), dp->end());
    o.y_infer.resize(o.y.size()), o.hn_infer.resize(B * H), o.cn_infer.resize(B * H);
    Vec<double> iws(lstm_inference_workspace_elems(pk.rows(), B, H));
    lstm_layer_inference(pk, L.params(), x.data(), h0.data(), c0.data(), o.y_infer.data(), o.hn_infer.data(),
                         o.cn_infer.data(), iws.data(), team);
    o.logits.resize(pk.rows() * V), o.dhid.resize(pk.rows() * H), o.dw.resize(V * H), o.db.resize(V);
    linear_forward(o.y.data(), pk.rows(), H, w.data(), bias.data(), V, o.logits.data(), team);
    o.dlogits.resize(o.logits.size());
    o.loss = cross_entropy(o.logits.data(), pk.rows(), V, targets.data(), o.dlogits.data(), 0.5, team);
    linear_backward(o.y.data(), pk.rows(), H, w.data(), V, o.dlogits.data(), o.dhid.data(), o.dw.data(), o.db.data(),
                    team);
    o.emb.resize(pk.rows() * I), o.dtable.resize(V * I);
    embedding_forward(ids.data(), pk.rows(), x.data(), I, o.emb.data(), team);
    embedding_backward(ids.data(), pk.rows(), o.dx.data(), I, o.dtable.data(), team);
    return o;
  };
  const Out serial = run(nullptr);
  expect_close("inference y", serial.y_infer, serial.y, 1e-14);
  expect_close("inference hn", serial.hn_infer, serial.hn, 1e-14);
  expect_close("inference cn", serial.cn_infer, serial.cn, 1e-14);
  for (int size : {2, 3}) {
    Team team(size);
    const Out t = run(&team);
    const std::string k = std::to_string(size) + " threads: ";
    for (auto [what, a, b] : {std::tuple{"y", &t.y, &serial.y}, {"hn", &t.hn, &serial.hn}, {"cn", &t.cn, &serial.cn},
                              {"dx", &t.dx, &serial.dx}, {"dh0", &t.dh0, &serial.dh0}, {"dc0", &t.dc0, &serial.dc0},
                              {"weight gradients", &t.grads, &serial.grads}, {"inference y", &t.y_infer, &serial.y},
                              {"inference hn", &t.hn_infer, &serial.hn}, {"inference cn", &t.cn_infer, &serial.cn},
                              {"logits", &t.logits, &serial.logits}, {"dlogits", &t.dlogits, &serial.dlogits},
                              {"linear dx", &t.dhid, &serial.dhid}, {"linear dw", &t.dw, &serial.dw},
                              {"linear db", &t.db, &serial.db}, {"embedding", &t.emb, &serial.emb},
                              {"embedding gradient", &t.dtable, &serial.dtable}})
      expect_close(k + what, *a, *b, 1e-13);
    EXPECT_NEAR(t.loss, serial.loss, 1e-12 * serial.loss) << k;
  }
}

// The float kernels with packed recurrent and input weights (packed_gemm.h, whose variants are tested
// there) against the double BLAS path: one layer with and without a projection, on 1 to 3 threads, with a
// hidden size whose shares leave partial panels and an input narrower than a panel (the input projection's
// K and dx's N), and a batch of 40 whose time steps go in two chunks of units on 1 thread (192 and 108 of
// H = 300: the second chunk starts at a panel inside the packed blocks and ends in a partial one). The
// packed buffer must have been written: the packed path ran.
TEST(CpuPackedRecurrence, FloatWithPackedWeightsMatchesDouble) {
  std::mt19937 rng(29);
  std::vector<int> forty(40);
  for (int b = 0; b < 40; ++b) forty[b] = 6 - b / 10;
  for (const auto& [lengths, H] : {std::pair{std::vector<int>{9, 7, 7, 4, 1}, 37}, std::pair{forty, 300}})
  for (int P : {0, 11}) {
    const Packing pk = Packing::from_lengths(lengths);
    const int I = 5, B = pk.batch();
    const int64_t rows = pk.rows();
    const int R = P > 0 ? P : H;
    const std::vector<Vec<double>> in = {
        random_vec<double>(4 * H * I, rng), random_vec<double>(4 * H * R, rng), random_vec<double>(4 * H, rng),
        random_vec<double>(4 * H, rng),     random_vec<double>(P * H, rng),     random_vec<double>(rows * I, rng, 1.0),
        random_vec<double>(B * R, rng),     random_vec<double>(B * H, rng),     random_vec<double>(rows * R, rng),
        random_vec<double>(B * R, rng),     random_vec<double>(B * H, rng)};
    // Outputs by name, in double; `packed` is the packed buffer (empty: BLAS).
    auto run = [&]<class T>(T, Team* team, std::vector<float>& packed) {
      std::vector<Vec<T>> v;
      for (const Vec<double>& e : in) v.emplace_back(e.begin(), e.end());
      const auto& [w_ih, w_hh, b_ih, b_hh, w_hr, x, h0, c0, dy, dhn, dcn] =
          std::tie(v[0], v[1], v[2], v[3], v[4], v[5], v[6], v[7], v[8], v[9], v[10]);
      const LstmLayerParams<T> p{w_ih.data(), w_hh.data(), b_ih.data(), b_hh.data(), I, H,
                                 P > 0 ? w_hr.data() : nullptr, P};
      float* scratch = packed.empty() ? nullptr : packed.data();
      Vec<T> y(rows * R), hn(B * R), cn(B * H), cache(lstm_cache_elems(rows, H, P)),
          ws(lstm_backward_workspace_elems(rows, B, H, P)), dx(rows * I), dh0(B * R), dc0(B * H), g_ih(w_ih.size()),
          g_hh(w_hh.size()), g_bi(b_ih.size()), g_bh(b_hh.size()), g_hr(w_hr.size()), iy(rows * R), ihn(B * R),
          icn(B * H), iws(lstm_inference_workspace_elems(rows, B, H, P));
      const LstmLayerCache<T> view = lstm_cache_view(cache.data(), rows, H, P);
      lstm_layer_forward(pk, p, x.data(), h0.data(), c0.data(), y.data(), hn.data(), cn.data(), view, team, scratch);
      lstm_layer_backward(pk, p, x.data(), h0.data(), c0.data(), view, dy.data(), dhn.data(), dcn.data(), dx.data(),
                          dh0.data(), dc0.data(), {g_ih.data(), g_hh.data(), g_bi.data(), g_bh.data(),
                                                   P > 0 ? g_hr.data() : nullptr},
                          ws.data(), team, scratch);
      lstm_layer_inference(pk, p, x.data(), h0.data(), c0.data(), iy.data(), ihn.data(), icn.data(), iws.data(), team,
                           scratch);
      std::vector<std::pair<std::string, Vec<double>>> out;
      for (auto& [name, e] : {std::pair<const char*, Vec<T>*>{"y", &y}, {"hn", &hn}, {"cn", &cn}, {"dx", &dx},
                              {"dh0", &dh0}, {"dc0", &dc0}, {"dW_ih", &g_ih}, {"dW_hh", &g_hh}, {"db_ih", &g_bi},
                              {"db_hh", &g_bh}, {"dW_hr", &g_hr}, {"inference y", &iy}, {"inference hn", &ihn},
                              {"inference cn", &icn}})
        out.emplace_back(name, Vec<double>(e->begin(), e->end()));
      return out;
    };
    std::vector<float> none;
    const auto want = run(0.0, nullptr, none);
    const WeightGradients by_default = weight_gradients();
    for (WeightGradients how : {WeightGradients::blas, WeightGradients::packed})
      for (int size : {1, 2, 3}) {
        set_weight_gradients(how);
        Team team(size);
        std::vector<float> packed(lstm_packed_elems(I, H, P, size), 0.0f);
        const auto got = run(0.0f, &team, packed);
        const std::string k = "H=" + std::to_string(H) + ", P=" + std::to_string(P) + ", " + std::to_string(size) +
                              " threads, weight gradients " +
                              (how == WeightGradients::packed ? "packed" : "BLAS") + ": ";
        for (size_t e = 0; e < got.size(); ++e) expect_close(k + got[e].first, got[e].second, want[e].second, 2e-5);
        EXPECT_TRUE(std::any_of(packed.begin(), packed.end(), [](float f) { return f != 0; })) << k << "packed unused";
      }
    set_weight_gradients(by_default);
  }
}

// Inference's two ways of sharing a batch, against the serial double training forward: 5 sequences (the
// members split the hidden units) and 50 (each member takes whole sequences: 16 or more per member on
// average on 1 to 3 threads), one batch of 50 with a sequence of most of the tokens, which leaves one of 3
// members none; in
// double (BLAS) and in float on packed weights, with initial states and with zeros.
TEST(CpuInference, BothSplitsMatchTheTrainingForward) {
  std::mt19937 rng(31);
  const int I = 5, H = 37;
  std::vector<int> many(50), skewed(50, 1);
  for (int b = 0; b < 50; ++b) many[b] = 12 - b / 5;
  skewed[0] = 300;
  for (const std::vector<int>& lengths : {std::vector<int>{9, 7, 7, 4, 1}, many, skewed}) {
    const Packing pk = Packing::from_lengths(lengths);
    const int B = pk.batch();
    const int64_t rows = pk.rows();
    const Layer<double> L(I, H, rng);
    const Layer<float> Lf = [&] {
      Layer<float> f(I, H, rng);
      f.w_ih.assign(L.w_ih.begin(), L.w_ih.end()), f.w_hh.assign(L.w_hh.begin(), L.w_hh.end());
      f.b_ih.assign(L.b_ih.begin(), L.b_ih.end()), f.b_hh.assign(L.b_hh.begin(), L.b_hh.end());
      return f;
    }();
    const Vec<double> x = random_vec<double>(rows * I, rng, 1.0), h0 = random_vec<double>(B * H, rng),
                      c0 = random_vec<double>(B * H, rng);
    const Vec<float> xf(x.begin(), x.end()), h0f(h0.begin(), h0.end()), c0f(c0.begin(), c0.end());
    for (bool states : {true, false}) {
      Vec<double> y(rows * H), hn(B * H), cn(B * H), cache(lstm_cache_elems(rows, H));
      lstm_layer_forward(pk, L.params(), x.data(), states ? h0.data() : nullptr, states ? c0.data() : nullptr,
                         y.data(), hn.data(), cn.data(), lstm_cache_view(cache.data(), rows, H));
      for (int size : {1, 2, 3}) {
        Team team(size);
        const std::string k = "B=" + std::to_string(B) + ", rows " + std::to_string(rows) + ", " +
                              std::to_string(size) + " threads, " + (states ? "initial states" : "zero states") + ": ";
        Vec<double> iy(rows * H, -7), ihn(B * H, -7), icn(B * H, -7), iws(lstm_inference_workspace_elems(rows, B, H));
        lstm_layer_inference(pk, L.params(), x.data(), states ? h0.data() : nullptr, states ? c0.data() : nullptr,
                             iy.data(), ihn.data(), icn.data(), iws.data(), &team);
        expect_close(k + "double y", iy, y, 1e-14);
        expect_close(k + "double hn", ihn, hn, 1e-14);
        expect_close(k + "double cn", icn, cn, 1e-14);
        Vec<float> fy(rows * H, -7), fhn(B * H, -7), fcn(B * H, -7), fws(lstm_inference_workspace_elems(rows, B, H));
        std::vector<float> packed(lstm_packed_elems(I, H, 0, size), 0.0f);
        lstm_layer_inference<float>(pk, Lf.params(), xf.data(), states ? h0f.data() : nullptr,
                                    states ? c0f.data() : nullptr, fy.data(), fhn.data(), fcn.data(), fws.data(),
                                    &team, packed.data());
        for (auto [what, got, want] : {std::tuple{"float y", &fy, &y}, {"float hn", &fhn, &hn}, {"float cn", &fcn, &cn}})
          expect_close(k + what, Vec<double>(got->begin(), got->end()), *want, 2e-5);
        EXPECT_TRUE(std::any_of(packed.begin(), packed.end(), [](float f) { return f != 0; })) << k << "packed unused";
      }
    }
  }
}

// The float kernels' exp, sigmoid and tanh (branch-free approximations) agree with double's libm to ~1e-6
// relative over the whole range of pre-activations, tiny ones included (tanh(x) ~ x there), in the training
// step and in the inference step, with a hidden size that leaves a scalar tail. Pre-activations up to +-1000
// saturate both steps to double's states, finite.
TEST(CpuFastMath, FloatCellMatchesDouble) {
  const int H = 1001, G = 4 * H;
  const Packing pk = Packing::from_lengths(std::vector<int>{1});
  Vec<double> c0(H);
  for (int j = 0; j < H; ++j) c0[j] = double(float(4 * (double(j) / (H - 1) - 0.5)));
  // Training's activated gates, c and h, then inference's c and h.
  auto run = [&]<class T>(T, const Vec<double>& w) {
    const Vec<double> zeros(G);
    const Vec<T> wt(w.begin(), w.end()), ct(c0.begin(), c0.end()), z(zeros.begin(), zeros.end()), hh(G * H);
    const T x = 1;
    Vec<T> y(H), cache(lstm_cache_elems(1, H)), iy(H), icn(H), iws(lstm_inference_workspace_elems(1, 1, H));
    const LstmLayerParams<T> p{wt.data(), hh.data(), z.data(), z.data(), 1, H};
    lstm_layer_forward<T>(pk, p, &x, nullptr, ct.data(), y.data(), nullptr, nullptr,
                          lstm_cache_view(cache.data(), 1, H));
    lstm_layer_inference<T>(pk, p, &x, nullptr, ct.data(), iy.data(), nullptr, icn.data(), iws.data());
    Vec<double> out(cache.begin(), cache.begin() + G + H);
    for (const Vec<T>* v : {&y, &icn, &iy}) out.insert(out.end(), v->begin(), v->end());
    return out;
  };
  // Gates relative to themselves (sigmoid(-30) ~ 1e-13 included); c and h, sums that may cancel, relative
  // to 1. Float's own rounding contributes ~6e-8 per operation.
  // The worst difference of n elements of f from `at` against d's from `want_at`.
  auto worst = [&](const Vec<double>& f, size_t at, const Vec<double>& d, size_t want_at, size_t n, bool relative) {
    double e = 0;
    for (size_t k = 0; k < n; ++k) {
      EXPECT_TRUE(std::isfinite(f[at + k])) << "element " << at + k;
      e = std::max(e, std::abs(f[at + k] - d[want_at + k]) / (relative ? std::abs(d[want_at + k]) : 1.0));
    }
    return e;
  };
  Vec<double> w(G);
  for (double range : {60.0, 2000.0}) {
    for (int k = 0; k < G; ++k) {
      const double u = double(k) / (G - 1);
      // [-range/2, range/2] and tiny values, exact in float so that both runs see the same inputs.
      w[k] = double(float(k % 3 == 0 ? 1e-6 * (u - 0.5) : range * (u - 0.5)));
    }
    const Vec<double> f = run(0.0f, w), d = run(0.0, w);
    const std::string k = "pre-activations up to " + std::to_string(int(range / 2)) + ": ";
    // 2e-6: the fast exp/tanh (~2e-7) plus float rounding, with margin for other compilers' code (~1.0e-6 seen).
    // Both float steps against double's training step.
    EXPECT_LE(worst(f, G, d, G, 2 * H, false), 2e-6) << k << "training c, h";
    EXPECT_LE(worst(f, G + 2 * H, d, G, 2 * H, false), 2e-6) << k << "inference c, h";
    if (range > 100) continue;  // beyond sigmoid(-87), float's gates are 0 or denormal
    const double gate = worst(f, 0, d, 0, G, true);
    EXPECT_LE(gate, 2e-6) << k << "gates";
    EXPECT_GT(gate, 0.0) << "float and double agree exactly: the float path cannot be the fast one";
  }
}

// The fast exp, sigmoid and tanh themselves against double's libm, over their whole input range, at a
// bound near their real error (the LSTM-cell test above allows 2e-6 for a whole cell, which let a
// coefficient raised by 1e-3 relative through): in the vector clone this CPU runs and on the scalar tail.
// Beyond exp's clamps (-87, 88) the result is exp(-87) or exp(88), never 0 or inf.
TEST(CpuFastMath, ActivationsMatchLibm) {
  struct Range {
    Activation a;
    double lo, hi;
  };
  std::vector<float> x;
  auto worst_relative = [&](Activation a, double lo, double hi) {
    x.clear();
    for (int k = 0; k <= 400003; ++k) x.push_back(float(lo + (hi - lo) * k / 400003));
    for (float t = 1e-30f; t < 1e-2f; t *= 1.37f) x.push_back(t), x.push_back(-t);  // tanh(x) ~ x there
    std::vector<float> y(x.size());
    activation_float(a, x.data(), int64_t(x.size()), y.data());
    double worst = 0;
    for (size_t i = 0; i < x.size(); ++i) {
      const double v = x[i];
      const double want = a == Activation::exp ? std::exp(v) : a == Activation::sigmoid ? 1 / (1 + std::exp(-v)) : std::tanh(v);
      if (want == 0) continue;
      worst = std::max(worst, std::abs(double(y[i]) - want) / std::abs(want));
    }
    return worst;
  };
  const double e = worst_relative(Activation::exp, -87, 88), s = worst_relative(Activation::sigmoid, -87, 87),
               t = worst_relative(Activation::tanh, -20, 20);
#if defined(__x86_64__) && defined(__GNUC__)
  // The clone the loader picked follows from these (x86-64-v4 needs AVX-512, v3 AVX2); the others do not run.
  std::cout << "CPU: AVX-512F " << (__builtin_cpu_supports("avx512f") ? "yes" : "no") << ", AVX2 "
            << (__builtin_cpu_supports("avx2") ? "yes" : "no") << "; ";
#endif
  std::cout << "max relative error: exp " << e << ", sigmoid " << s << ", tanh " << t << "\n";
  EXPECT_LE(e, 3e-7);
  EXPECT_LE(s, 3e-7);
  EXPECT_LE(t, 3e-7);
  const std::vector<float> tails = {-200, -100, -87.5f, 88.5f, 100, 1000};
  std::vector<float> y(tails.size());
  activation_float(Activation::exp, tails.data(), int64_t(tails.size()), y.data());
  for (size_t i = 0; i < tails.size(); ++i) {
    const double clamp = std::exp(tails[i] < 0 ? -87.0 : 88.0);
    EXPECT_NEAR(y[i], clamp, 3e-7 * clamp) << "exp(" << tails[i] << ")";
  }
}

// Float cross-entropy (float exponentials) agrees with double's.
TEST(CpuFastMath, FloatCrossEntropyMatchesDouble) {
  std::mt19937 rng(13);
  const int rows = 40, V = 37;
  const Vec<double> logits = random_vec<double>(rows * V, rng, 12.0);
  std::vector<int32_t> targets(rows);
  for (int r = 0; r < rows; ++r) targets[r] = (r * 7) % V;
  Vec<double> dd(rows * V);
  const double ld = cross_entropy(logits.data(), rows, V, targets.data(), dd.data(), 0.25);
  const Vec<float> lf(logits.begin(), logits.end());
  Vec<float> df(rows * V);
  const double lossf = cross_entropy(lf.data(), rows, V, targets.data(), df.data(), 0.25f);
  EXPECT_NEAR(lossf, ld, 1e-6 * ld);
  for (int e = 0; e < rows * V; ++e) EXPECT_NEAR(df[e], dd[e], 1e-7) << "element " << e;
}

// ids -> embedding -> dropout mask -> 2-layer LSTM (zero initial states) -> linear -> mean cross-entropy,
// checked w.r.t. every parameter. The logits' gradient is written over the logits, as a trainer would.
TEST(CpuModelGradient, FullChainFiniteDifferences) {
  std::mt19937 rng(12);
  const Packing pk = Packing::from_lengths(std::vector<int>{4, 2, 2, 1});
  const int V = 7, E = 3, H = 4;
  const int64_t rows = pk.rows();
  const std::vector<int32_t> ids = {3, 1, 3, 6, 0, 3, 2, 1, 5}, targets = {1, 2, 0, 6, 3, 1, 4, 4, 5};
  ASSERT_EQ(static_cast<int64_t>(ids.size()), rows);
  Vec<double> mask(rows * E);
  std::bernoulli_distribution keep(0.7);
  for (double& m : mask) m = keep(rng) ? 1 / 0.7 : 0;
  Vec<double> table = random_vec<double>(V * E, rng, 1.0), w = random_vec<double>(V * H, rng),
              b = random_vec<double>(V, rng);
  std::vector<Layer<double>> layers{Layer<double>(E, H, rng), Layer<double>(H, H, rng)};
  const Vec<Vec<double>> none(2);
  const double scale = 1.0 / static_cast<double>(rows);

  Vec<double> emb(rows * E), logits(rows * V);
  auto forward = [&] {
    embedding_forward(ids.data(), rows, table.data(), E, emb.data());
    apply_mask(emb.data(), mask.data(), rows * E, emb.data());
    StackForward<double> f = stack_forward(pk, layers, emb, none, none);
    linear_forward(f.y.back().data(), rows, H, w.data(), b.data(), V, logits.data());
    return f;
  };
  auto loss = [&] {
    forward();
    return scale * cross_entropy<double>(logits.data(), rows, V, targets.data(), nullptr, 1);
  };

  StackForward<double> f = forward();
  cross_entropy(logits.data(), rows, V, targets.data(), logits.data(), scale);
  Vec<double> dw(V * H), db(V), dy(rows * H), dtable(V * E);
  linear_backward(f.y.back().data(), rows, H, w.data(), V, logits.data(), dy.data(), dw.data(), db.data());
  StackBackward<double> g = stack_backward(pk, layers, emb, none, none, f, dy, none, none);
  apply_mask(g.dx.data(), mask.data(), rows * E, g.dx.data());
  embedding_backward(ids.data(), rows, g.dx.data(), E, dtable.data());

  expect_gradient("embedding table", table, dtable, loss);
  for (int l = 0; l < 2; ++l)
    for (auto& [name, p, dp] : layers[l].tensors())
      expect_gradient("layer " + std::to_string(l) + " " + name, *p, *dp, loss);
  expect_gradient("output weight", w, dw, loss);
  expect_gradient("output bias", b, db, loss);
}

}  // namespace
}  // namespace rnn_dist::cpu

namespace rnn_dist::cpu {
namespace {

// Pooling over a packed batch: last (with two directions, the forward half from each sequence's last row
// and the reverse half from its first), mean and max, against a hand count and against central finite
// differences in double precision.
TEST(CpuPool, PoolsAndTheirGradients) {
  const Packing packing = Packing::from_lengths(std::vector<int>{4, 2, 1});
  const int dim = 6;
  std::mt19937 rng(5);
  const Vec<double> y = random_vec<double>(packing.rows() * dim, rng), dout = random_vec<double>(3 * dim, rng);
  // Hand count for `last`, two directions: sequence 0's forward half from t = 3, reverse half from t = 0.
  Vec<double> out(3 * dim);
  std::vector<int32_t> argmax(3 * dim);
  pool_forward<double>(y.data(), packing, dim, 2, Pool::last, out.data(), argmax.data());
  EXPECT_EQ(out[0], y[packing.row(3, 0) * dim + 0]);
  EXPECT_EQ(out[3], y[packing.row(0, 0) * dim + 3]);
  EXPECT_EQ(out[2 * dim + 1], y[packing.row(0, 2) * dim + 1]);  // a length-1 sequence: its only row
  pool_forward<double>(y.data(), packing, dim, 1, Pool::mean, out.data(), argmax.data());
  EXPECT_NEAR(out[dim + 2], (y[packing.row(0, 1) * dim + 2] + y[packing.row(1, 1) * dim + 2]) / 2, 1e-15);
  for (int directions : {1, 2})
    for (Pool pool : {Pool::last, Pool::mean, Pool::max}) {
      auto loss = [&](const Vec<double>& in) {
        Vec<double> o(3 * dim);
        std::vector<int32_t> am(3 * dim);
        pool_forward<double>(in.data(), packing, dim, directions, pool, o.data(), am.data());
        return dot(o, dout);
      };
      pool_forward<double>(y.data(), packing, dim, directions, pool, out.data(), argmax.data());
      Vec<double> dy(y.size());
      pool_backward<double>(dout.data(), packing, dim, directions, pool, argmax.data(), dy.data());
      for (size_t e = 0; e < y.size(); ++e) {
        Vec<double> p = y, m = y;
        p[e] += 1e-6;
        m[e] -= 1e-6;
        EXPECT_NEAR(dy[e], (loss(p) - loss(m)) / 2e-6, 1e-8) << pool_name(pool) << ", " << directions << " direction(s), element " << e;
      }
    }
}

// Max pooling by hand (issue 27 #6), where the finite-difference check above cannot see it (forward and
// backward share the argmax): each column's maximum over the sequence's own rows only, the last row
// included, the first of equal values on a tie, and the gradient to that row alone.
TEST(CpuPool, MaxPoolingByHand) {
  const Packing packing = Packing::from_lengths(std::vector<int>{3, 2});
  const int dim = 3;
  // y[t][b] rows; sequence 0 (t = 0..2), sequence 1 (t = 0..1).
  //   column 0: its maximum at the last row; column 1: a tie (t = 0 and 1); column 2: at the first row.
  const double rows[3][2][3] = {{{1, 5, 9}, {0, 4, -1}}, {{2, 5, 3}, {7, 4, -2}}, {{8, 1, 2}, {0, 0, 0}}};
  Vec<double> y(packing.rows() * dim, 0.0);
  for (int t = 0; t < 3; ++t)
    for (int b = 0; b < packing.batch(); ++b)
      if (t < packing.lengths[b])
        for (int k = 0; k < dim; ++k) y[packing.row(t, b) * dim + k] = rows[t][b][k];
  Vec<double> out(2 * dim);
  std::vector<int32_t> argmax(2 * dim, -1);
  pool_forward<double>(y.data(), packing, dim, 1, Pool::max, out.data(), argmax.data());
  EXPECT_EQ(out, (Vec<double>{8, 5, 9, 7, 4, -1}));
  EXPECT_EQ(argmax, (std::vector<int32_t>{2, 0, 0, 1, 0, 0}));  // ties: the first row
  const Vec<double> dout = {1, 2, 3, 4, 5, 6};
  Vec<double> dy(y.size(), 99.0);
  pool_backward<double>(dout.data(), packing, dim, 1, Pool::max, argmax.data(), dy.data());
  Vec<double> want(y.size(), 0.0);
  want[packing.row(2, 0) * dim + 0] = 1, want[packing.row(0, 0) * dim + 1] = 2, want[packing.row(0, 0) * dim + 2] = 3;
  want[packing.row(1, 1) * dim + 0] = 4, want[packing.row(0, 1) * dim + 1] = 5, want[packing.row(0, 1) * dim + 2] = 6;
  EXPECT_EQ(dy, want);
}

// The backend's name says which OpenBLAS kernels run, and flags kernels narrower than the CPU's AVX-512 (an
// OpenBLAS that did not recognise the CPU, or a forced core type: docs/benchmarks.md, session 15), where
// the weight gradients go to the packed kernel if it runs AVX-512; and where it takes K blocks of 512.
TEST(BlasKernels, TheBackendNamesTheKernelsAndFlagsUnusedAvx512) {
  const std::string core = openblas_get_corename();
  const std::string name = make_cpu_backend(1)->device_name();
  EXPECT_EQ(name.rfind("cpu (OpenBLAS " + core + " kernels", 0), 0u) << name;
  const WeightGradients by_default = weight_gradients();
  EXPECT_EQ(by_default == WeightGradients::packed,
            (blas_kernels_leave_avx512_unused() && packed_gemm_runs_avx512()) || packed_gemm_long_k_blocks());
  EXPECT_EQ(name.find("OPENBLAS_CORETYPE=SkylakeX") != std::string::npos, blas_kernels_leave_avx512_unused()) << name;
  EXPECT_EQ(name, "cpu (" + blas_kernels() +
                      (by_default == WeightGradients::packed ? "; weight gradients on rnn_dist's packed kernel" : "") + ")");
  // The rule on OpenBLAS's names, as DYNAMIC_ARCH builds give them and in a one-CPU build's capitals.
  for (const auto& [c, avx512, want] : {std::tuple{"Haswell", true, true}, {"HASWELL", true, true}, {"Zen", true, true},
                                        {"Sandybridge", true, true}, {"SkylakeX", true, false}, {"SKYLAKEX", true, false},
                                        {"Cooperlake", true, false}, {"SapphireRapids", true, false},
                                        {"Haswell", false, false}})
    EXPECT_EQ(leaves_avx512_unused(c, avx512), want) << c << (avx512 ? " on an AVX-512 CPU" : " on a CPU without AVX-512");
}

// A backend primes one of OpenBLAS's work buffers for each member of its team, and a process primes them
// once (their effect is on speed, measured by bench/blas_buffers.sh, not here).
TEST(BlasKernels, ABackendPrimesABufferForEachMemberOnce) {
  make_cpu_backend(3);
  Team one(1);
  const int primed = prime_blas_buffers(one);
  EXPECT_GE(primed, 3);
  Team more(primed + 1);
  EXPECT_EQ(prime_blas_buffers(more), primed + 1);
  EXPECT_EQ(prime_blas_buffers(one), primed + 1);
}

}  // namespace
}  // namespace rnn_dist::cpu

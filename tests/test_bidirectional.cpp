// Tests of the bidirectional LSTM of the CPU backend (LstmShape::bidirectional) against an independent
// reference in double precision: every sequence alone, its reverse direction run on the sequence's tokens
// reversed by hand, layers joined side by side. The CPU backend's packed implementation (which reverses
// rows inside the packed batch) must give the reference's outputs, final states and every gradient; the
// reference's own gradients are checked against central finite differences. Also: PyTorch's parameter
// names and shapes, and the inference pass equal to the training pass. Each test runs without and with a
// projection (--proj-size: h, the outputs and the next layer's input P wide, weight_hr per direction).
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

namespace rnn_dist {
namespace {

using Vec = std::vector<double>;

constexpr int kIn = 3, kH = 4, kLayers = 2;
const std::vector<int> kLengths = {5, 3, 3, 1};

// The reference: one sequence of length L (rows = time), weights in the CPU backend's canonical layout
// (w: the whole region in double; slices as canonical_params()). Returns y (L x 2H) and the final states
// (layers*2 x H each); with dy given, accumulates the weight gradients into dw and returns dx in dx.
struct Reference {
  const std::vector<ParamSlice>& slices;
  const Vec& w;
  int proj = 0;

  int R() const { return proj > 0 ? proj : kH; }          // the width of h and of a direction's outputs
  int per() const { return proj > 0 ? 5 : 4; }           // tensors per direction
  cpu::LstmLayerParams<double> params(int l, int d) const {
    const ParamSlice* s = &slices[size_t(per() * (l * 2 + d))];
    cpu::LstmLayerParams<double> p{w.data() + s[0].offset, w.data() + s[1].offset, w.data() + s[2].offset,
                                   w.data() + s[3].offset, l == 0 ? kIn : 2 * R(),  kH};
    if (proj > 0) p.w_hr = w.data() + s[4].offset, p.proj = proj;
    return p;
  }

  static Vec reversed(const Vec& m, int rows, int cols) {
    Vec out(m.size());
    for (int t = 0; t < rows; ++t) std::copy_n(m.begin() + t * cols, cols, out.begin() + (rows - 1 - t) * cols);
    return out;
  }

  // Forward (and with dy, backward) of the whole stack over one sequence.
  void run(const Vec& x, int L, Vec& y, Vec& hn, Vec& cn, const Vec* dy, Vec* dx, Vec* dw) const {
    const Packing one = Packing::from_lengths(std::vector<int>{L});
    const int R = this->R();
    std::vector<Vec> inputs(kLayers), caches(kLayers * 2);
    hn.assign(kLayers * 2 * R, 0);
    cn.assign(kLayers * 2 * kH, 0);
    Vec input = x;
    for (int l = 0; l < kLayers; ++l) {
      const int in = l == 0 ? kIn : 2 * R;
      inputs[l] = input;
      Vec out(L * 2 * R);
      for (int d = 0; d < 2; ++d) {
        const Vec xin = d ? reversed(input, L, in) : input;
        Vec dir_y(L * R);
        caches[l * 2 + d].assign(cpu::lstm_cache_elems(L, kH, proj), 0);
        cpu::lstm_layer_forward<double>(one, params(l, d), xin.data(), nullptr, nullptr, dir_y.data(),
                                        hn.data() + (l * 2 + d) * R, cn.data() + (l * 2 + d) * kH,
                                        cpu::lstm_cache_view(caches[l * 2 + d].data(), L, kH, proj));
        const Vec back = d ? reversed(dir_y, L, R) : dir_y;
        for (int t = 0; t < L; ++t) std::copy_n(back.begin() + t * R, R, out.begin() + t * 2 * R + d * R);
      }
      input = out;
    }
    y = input;
    if (!dy) return;
    Vec dout = *dy;
    for (int l = kLayers - 1; l >= 0; --l) {
      const int in = l == 0 ? kIn : 2 * R;
      Vec din(L * in, 0);
      for (int d = 0; d < 2; ++d) {
        Vec dir_dy(L * R);
        for (int t = 0; t < L; ++t) std::copy_n(dout.begin() + t * 2 * R + d * R, R, dir_dy.begin() + t * R);
        if (d) dir_dy = reversed(dir_dy, L, R);
        const Vec xin = d ? reversed(inputs[l], L, in) : inputs[l];
        Vec dir_dx(L * in), ws(cpu::lstm_backward_workspace_elems(L, 1, kH, proj));
        const cpu::LstmLayerParams<double> p = params(l, d);
        const ParamSlice* s = &slices[size_t(per() * (l * 2 + d))];
        cpu::LstmLayerGrads<double> g{dw->data() + s[0].offset, dw->data() + s[1].offset, dw->data() + s[2].offset,
                                      dw->data() + s[3].offset};
        if (proj > 0) g.w_hr = dw->data() + s[4].offset;
        cpu::lstm_layer_backward<double>(one, p, xin.data(), nullptr, nullptr,
                                         cpu::lstm_cache_view(caches[l * 2 + d].data(), L, kH, proj), dir_dy.data(),
                                         nullptr, nullptr, dir_dx.data(), nullptr, nullptr, g, ws.data());
        if (d) dir_dx = reversed(dir_dx, L, in);
        for (size_t e = 0; e < din.size(); ++e) din[e] += dir_dx[e];
      }
      dout = din;
    }
    *dx = dout;
  }
};

double max_rel_error(const std::vector<float>& got, const Vec& want) {
  double err = 0, ref = 0;
  for (size_t e = 0; e < want.size(); ++e) {
    err = std::max(err, std::abs(double(got[e]) - want[e]));
    ref = std::max(ref, std::abs(want[e]));
  }
  return err / ref;
}

// The parameter: the projection's width (0: none).
class Bidirectional : public ::testing::TestWithParam<int> {
 protected:
  int proj() const { return GetParam(); }
  int R() const { return proj() > 0 ? proj() : kH; }
  void SetUp() override {
    backend_ = make_backend(DeviceType::cpu, 0, 2);
    lstm_ = backend_->make_lstm({kIn, kH, kLayers, 0.0f, true, proj()});
    std::mt19937 rng(11);
    std::uniform_real_distribution<double> u(-0.5, 0.5);
    w_.resize(lstm_->weight_elems());
    for (double& v : w_) v = u(rng);
    packing_ = Packing::from_lengths(kLengths);
    x_.resize(packing_.rows() * kIn);
    dy_.resize(packing_.rows() * 2 * R());
    for (double& v : x_) v = u(rng);
    for (double& v : dy_) v = u(rng);
  }

  // Rows of sequence b (time order) of a packed matrix with `cols` columns.
  Vec sequence(const Vec& packed, int b, int cols) const {
    Vec out;
    for (int t = 0; t < kLengths[b]; ++t)
      out.insert(out.end(), packed.begin() + packing_.row(t, b) * cols, packed.begin() + (packing_.row(t, b) + 1) * cols);
    return out;
  }

  std::unique_ptr<Backend> backend_;
  std::unique_ptr<Lstm> lstm_;
  Vec w_, x_, dy_;
  Packing packing_;
};

TEST_P(Bidirectional, PyTorchNamesAndShapes) {
  const std::vector<ParamSlice> p = lstm_->canonical_params();
  const size_t n = proj() > 0 ? 5 : 4;  // tensors per direction
  ASSERT_EQ(p.size(), 4 * n);
  EXPECT_EQ(p[0].name, "weight_ih_l0");
  EXPECT_EQ(p[1].shape, (std::vector<int64_t>{4 * kH, R()}));
  EXPECT_EQ(p[n].name, "weight_ih_l0_reverse");
  EXPECT_EQ(p[n + 1].name, "weight_hh_l0_reverse");
  EXPECT_EQ(p[n + 3].name, "bias_hh_l0_reverse");
  if (proj() > 0) {
    EXPECT_EQ(p[4].name, "weight_hr_l0");
    EXPECT_EQ(p[4].shape, (std::vector<int64_t>{proj(), kH}));
    EXPECT_EQ(p[n + 4].name, "weight_hr_l0_reverse");
  }
  EXPECT_EQ(p[2 * n].name, "weight_ih_l1");
  EXPECT_EQ(p[2 * n].shape, (std::vector<int64_t>{4 * kH, 2 * R()}));  // layer 1 reads both directions
  EXPECT_EQ(p[3 * n].name, "weight_ih_l1_reverse");
  EXPECT_EQ(p[3 * n].shape, (std::vector<int64_t>{4 * kH, 2 * R()}));
}

// The packed implementation equals the reference sequence by sequence: outputs, final states (index
// layer * 2 + direction, as PyTorch's h_n) and every gradient.
TEST_P(Bidirectional, PackedEqualsTheReferenceWithEveryGradient) {
  const int64_t rows = packing_.rows(), B = packing_.batch(), R = this->R();
  std::vector<float> wf(w_.begin(), w_.end()), xf(x_.begin(), x_.end()), dyf(dy_.begin(), dy_.end());
  std::vector<float> y(rows * 2 * R), hn(kLayers * 2 * B * R), cn(kLayers * 2 * B * kH), dx(rows * kIn),
      dw(wf.size(), 0);
  lstm_->forward(wf.data(), packing_, xf.data(), nullptr, nullptr, y.data(), hn.data(), cn.data(), true, 1);
  lstm_->backward(wf.data(), dyf.data(), nullptr, nullptr, dx.data(), nullptr, nullptr, dw.data());

  const std::vector<ParamSlice> slices = lstm_->canonical_params();
  const Reference ref{slices, w_, proj()};
  Vec want_dw(w_.size(), 0);
  for (int b = 0; b < B; ++b) {
    const int L = kLengths[b];
    Vec ry, rhn, rcn, rdx;
    const Vec rdy = sequence(dy_, b, 2 * R);
    ref.run(sequence(x_, b, kIn), L, ry, rhn, rcn, &rdy, &rdx, &want_dw);
    std::vector<float> got_y, got_dx, got_hn, got_cn;
    for (int t = 0; t < L; ++t) {
      got_y.insert(got_y.end(), y.begin() + packing_.row(t, b) * 2 * R, y.begin() + (packing_.row(t, b) + 1) * 2 * R);
      got_dx.insert(got_dx.end(), dx.begin() + packing_.row(t, b) * kIn, dx.begin() + (packing_.row(t, b) + 1) * kIn);
    }
    for (int k = 0; k < kLayers * 2; ++k) {
      got_hn.insert(got_hn.end(), hn.begin() + (k * B + b) * R, hn.begin() + (k * B + b + 1) * R);
      got_cn.insert(got_cn.end(), cn.begin() + (k * B + b) * kH, cn.begin() + (k * B + b + 1) * kH);
    }
    EXPECT_LE(max_rel_error(got_y, ry), 2e-6) << "y of sequence " << b;
    EXPECT_LE(max_rel_error(got_hn, rhn), 2e-6) << "h_n of sequence " << b;
    EXPECT_LE(max_rel_error(got_cn, rcn), 2e-6) << "c_n of sequence " << b;
    EXPECT_LE(max_rel_error(got_dx, rdx), 1e-5) << "dx of sequence " << b;
  }
  for (const ParamSlice& s : slices) {
    const int64_t n = numel_of(s.shape);
    std::vector<float> got(dw.begin() + s.offset, dw.begin() + s.offset + n);
    EXPECT_LE(max_rel_error(got, Vec(want_dw.begin() + s.offset, want_dw.begin() + s.offset + n)), 1e-5) << s.name;
  }

  // Inference: the same outputs and final states.
  std::vector<float> yi(y.size()), hni(hn.size()), cni(cn.size());
  lstm_->forward(wf.data(), packing_, xf.data(), nullptr, nullptr, yi.data(), hni.data(), cni.data(), false, 1);
  EXPECT_EQ(yi, y);
  EXPECT_EQ(hni, hn);
  EXPECT_EQ(cni, cn);
}

// The reference's gradients (which the packed implementation matched above) against central finite
// differences of sum(y * dy) in double precision: every weight of one direction of each layer, and the
// inputs.
TEST_P(Bidirectional, ReferenceGradientsMatchFiniteDifferences) {
  const std::vector<ParamSlice> slices = lstm_->canonical_params();
  const int b = 1, L = kLengths[b];
  const Vec x = sequence(x_, b, kIn), dy = sequence(dy_, b, 2 * R());
  Vec w = w_;
  auto loss = [&](const Vec& weights, const Vec& input) {
    Vec y, hn, cn;
    Reference{slices, weights, proj()}.run(input, L, y, hn, cn, nullptr, nullptr, nullptr);
    double s = 0;
    for (size_t e = 0; e < y.size(); ++e) s += y[e] * dy[e];
    return s;
  };
  Vec y, hn, cn, dx, dw(w.size(), 0);
  Reference{slices, w, proj()}.run(x, L, y, hn, cn, &dy, &dx, &dw);
  const double eps = 1e-6;
  std::vector<std::string> names = {"weight_ih_l0_reverse", "weight_hh_l0", "bias_ih_l1_reverse", "weight_ih_l1"};
  if (proj() > 0) names.insert(names.end(), {"weight_hr_l0_reverse", "weight_hr_l1", "weight_hh_l1_reverse"});
  for (const std::string& name : names) {
    const ParamSlice& s = *std::find_if(slices.begin(), slices.end(), [&](const ParamSlice& p) { return p.name == name; });
    for (int64_t e = s.offset; e < s.offset + numel_of(s.shape); e += 3) {
      Vec wp = w, wm = w;
      wp[e] += eps;
      wm[e] -= eps;
      EXPECT_NEAR(dw[e], (loss(wp, x) - loss(wm, x)) / (2 * eps), 1e-7) << name << " element " << e - s.offset;
    }
  }
  for (size_t e = 0; e < x.size(); ++e) {
    Vec xp = x, xm = x;
    xp[e] += eps;
    xm[e] -= eps;
    EXPECT_NEAR(dx[e], (loss(w, xp) - loss(w, xm)) / (2 * eps), 1e-7) << "x element " << e;
  }
}

INSTANTIATE_TEST_SUITE_P(Projection, Bidirectional, ::testing::Values(0, 3),
                         [](const ::testing::TestParamInfo<int>& p) { return p.param ? "proj3" : "none"; });

}  // namespace
}  // namespace rnn_dist

// rnn_dist's CPU LSTM against oneDNN's LSTM primitive (issue 29), on the same weights, inputs and output
// gradients, over batches of real packed sequences from a sequence file, with the same threads, in one
// run next to this machine's sgemm ceiling. Each implementation computes the training forward pass and
// the backward pass (data and weights) of a multi-layer LSTM with zero initial states, layer by layer
// (oneDNN's primitive runs several layers only when every layer's input is as wide as its output).
// oneDNN wants equal lengths, so it runs each batch two ways: padded to the batch's longest sequence
// (what a user of it pays; the padded rows count as its work only in its own GFLOP/s), and in length
// buckets (one call per distinct length of the batch, no padding). Before timing, the results are
// compared on the first batch: the outputs, the input gradients and every weight gradient must agree
// within 1e-4 relative (max |a - b| / max |b| per tensor), or the comparison is void (exit 1). The
// reverse direction of a padded batch would start in the padding, so a bidirectional model's padded run
// is timed but not checked (its buckets are). Timed batch by batch, each batch's best of three rounds;
// rnn_dist also with its weight gradients on the other of its two kernels, and each implementation's
// forward and backward parts apart, to show where a difference is.
//   onednn_lstm FILE.h5 S|L|B [--steps N (8)] [--threads T (1)]
// S: E=64, H=256, 2 layers, 32 sequences (lm file); L: E=256, H=1024, 2 layers, 64 sequences (lm file);
// B: S's shape bidirectional, 32 sequences (classify file: the classifier's shape). As train_throughput.
#include <omp.h>
#include <oneapi/dnnl/dnnl.hpp>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <iostream>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "rnn_dist/backends/make_backend.h"
#include "rnn_dist/cpu/blas_kernels.h"
#include "rnn_dist/cpu/cpu_kernels.h"
#include "rnn_dist/data/dataset.h"
#include "rnn_dist/nn/backend.h"
#include "rnn_dist/train/batch_plan.h"
#include "rnn_dist/util/error.h"
#include "rnn_dist/util/random.h"
#include "sgemm_ceiling.h"

using namespace rnn_dist;
using Clock = std::chrono::steady_clock;
using bench::seconds;
using tag = dnnl::memory::format_tag;
using dt = dnnl::memory::data_type;

namespace {

struct Config {
  int embed = 64, hidden = 256, layers = 2, batch = 32;
  bool bidirectional = false;
};

std::vector<float> random_floats(size_t n, uint64_t seed, double bound) {
  Rng rng(seed);
  std::vector<float> v(n);
  for (float& x : v) x = float(rng.uniform(-bound, bound));
  return v;
}

// max |a - b| / max |b|.
double relative_error(const std::vector<float>& a, const std::vector<float>& b) {
  double diff = 0, scale = 0;
  for (size_t i = 0; i < b.size(); ++i) diff = std::max(diff, double(std::abs(a[i] - b[i]))), scale = std::max(scale, double(std::abs(b[i])));
  return scale > 0 ? diff / scale : diff;
}

// Multiply-adds x 2 of a forward pass over `rows` rows; the backward pass (data and weights) is twice that.
double forward_flops(const Config& c, int64_t rows) {
  const int D = c.bidirectional ? 2 : 1;
  double f = 0;
  for (int l = 0; l < c.layers; ++l) f += 2.0 * 4 * c.hidden * double((l == 0 ? c.embed : D * c.hidden) + c.hidden) * D;
  return f * double(rows);
}

// One layer's weights in PyTorch's layout (per direction weight_ih 4H x in, weight_hh 4H x H, and the two
// biases), and their gradients.
struct LayerWeights {
  int in = 0;
  std::vector<float> w_ih, w_hh, b_ih, b_hh;  // directions back to back
};

// rnn_dist's LSTM of the config on the CPU backend, with the weights given per layer.
class OursLstm {
 public:
  OursLstm(Backend& cpu, const Config& c, const std::vector<LayerWeights>& layers)
      : lstm_(cpu.make_lstm({c.embed, c.hidden, c.layers, 0.0f, c.bidirectional})), w_(lstm_->weight_elems()) {
    for (const ParamSlice& s : lstm_->canonical_params()) {
      const int l = s.name[s.name.find("_l") + 2] - '0', d = s.name.ends_with("_reverse") ? 1 : 0;
      const LayerWeights& lw = layers[size_t(l)];
      const std::vector<float>& from = s.name.starts_with("weight_ih") ? lw.w_ih
                                       : s.name.starts_with("weight_hh") ? lw.w_hh
                                       : s.name.starts_with("bias_ih")   ? lw.b_ih
                                                                         : lw.b_hh;
      const size_t n = size_t(numel_of(s.shape));
      std::copy_n(from.begin() + d * n, n, w_.begin() + s.offset);
    }
  }
  Lstm& lstm() { return *lstm_; }
  const std::vector<float>& weights() const { return w_; }
  // A layer's gradients (PyTorch layout, directions back to back) out of the flat gradient.
  LayerWeights grads(const std::vector<float>& dw, int layer) const {
    LayerWeights g;
    for (const ParamSlice& s : lstm_->canonical_params()) {
      if (s.name[s.name.find("_l") + 2] - '0' != layer) continue;
      std::vector<float>& to = s.name.starts_with("weight_ih") ? g.w_ih
                               : s.name.starts_with("weight_hh") ? g.w_hh
                               : s.name.starts_with("bias_ih")   ? g.b_ih
                                                                 : g.b_hh;
      to.insert(to.end(), dw.begin() + s.offset, dw.begin() + s.offset + numel_of(s.shape));
    }
    return g;
  }

 private:
  std::unique_ptr<Lstm> lstm_;
  std::vector<float> w_;
};

// oneDNN's LSTM over equal-length batches of N sequences of T steps (tnc layout), one primitive pair per
// layer and shape, created before it is timed; weights reordered once per primitive from PyTorch's layout
// (ldgoi: per direction, gates i, f, g, o stacked, each H x in), one bias per gate (b_ih + b_hh).
class OneDnnLstm {
 public:
  OneDnnLstm(const Config& c, const std::vector<LayerWeights>& layers) : c_(c), eng_(dnnl::engine::kind::cpu, 0), s_(eng_) {
    const int D = c.bidirectional ? 2 : 1, H = c.hidden;
    for (const LayerWeights& lw : layers) {
      User u;
      u.in = lw.in;
      u.w_ih = lw.w_ih;
      u.w_hh = lw.w_hh;
      u.bias.resize(lw.b_ih.size());
      for (size_t i = 0; i < u.bias.size(); ++i) u.bias[i] = lw.b_ih[i] + lw.b_hh[i];
      // Logical dims are (layers, directions, input, gates, outputs); ldgoi stores them as PyTorch does.
      u.w_ih_md = dnnl::memory::desc({1, D, lw.in, 4, H}, dt::f32, tag::ldgoi);
      u.w_hh_md = dnnl::memory::desc({1, D, H, 4, H}, dt::f32, tag::ldgoi);
      u.bias_md = dnnl::memory::desc({1, D, 4, H}, dt::f32, tag::ldgo);
      user_.push_back(std::move(u));
    }
  }

  // Builds (once) the primitives for batches of N sequences of T steps.
  void prepare(int T, int N) {
    if (shapes_.count({T, N})) return;
    const int D = c_.bidirectional ? 2 : 1, H = c_.hidden;
    const auto dir = c_.bidirectional ? dnnl::rnn_direction::bidirectional_concat : dnnl::rnn_direction::unidirectional_left2right;
    Shape& sh = shapes_[{T, N}];
    for (const User& u : user_) {
      Layer L;
      // The initial states are given, as zeros: without them oneDNN 2.6.3's weight_hh gradient differed from
      // ours by up to 27% here, while every other result agreed (docs/benchmarks.md).
      const dnnl::memory::desc src({T, N, u.in}, dt::f32, tag::tnc), dst({T, N, D * H}, dt::f32, tag::tnc),
          state({1, D, N, H}, dt::f32, tag::ldnc), none;
      const dnnl::memory::desc w_any({1, D, u.in, 4, H}, dt::f32, tag::any), wi_any({1, D, H, 4, H}, dt::f32, tag::any);
      dnnl::lstm_forward::desc fd(dnnl::prop_kind::forward_training, dir, src, state, state, w_any, wi_any, u.bias_md,
                                  dst, none, none);
      L.fwd_pd = dnnl::lstm_forward::primitive_desc(fd, eng_);
      dnnl::lstm_backward::desc bd(dnnl::prop_kind::backward, dir, src, state, state, w_any, wi_any, u.bias_md, dst,
                                   none, none, src, state, state, w_any, wi_any, u.bias_md, dst, none, none);
      L.bwd_pd = dnnl::lstm_backward::primitive_desc(bd, eng_, L.fwd_pd);
      L.fwd = dnnl::lstm_forward(L.fwd_pd);
      L.bwd = dnnl::lstm_backward(L.bwd_pd);
      auto reordered = [&](const dnnl::memory::desc& want, const dnnl::memory::desc& have, const std::vector<float>& data) {
        dnnl::memory from(have, eng_, const_cast<float*>(data.data())), to(want, eng_);
        dnnl::reorder(from, to).execute(s_, from, to);
        return to;
      };
      L.w_fwd = reordered(L.fwd_pd.weights_layer_desc(), u.w_ih_md, u.w_ih);
      L.wi_fwd = reordered(L.fwd_pd.weights_iter_desc(), u.w_hh_md, u.w_hh);
      L.w_bwd = reordered(L.bwd_pd.weights_layer_desc(), u.w_ih_md, u.w_ih);
      L.wi_bwd = reordered(L.bwd_pd.weights_iter_desc(), u.w_hh_md, u.w_hh);
      L.bias = dnnl::memory(u.bias_md, eng_, const_cast<float*>(u.bias.data()));
      L.src = dnnl::memory(src, eng_);
      L.dst = dnnl::memory(dst, eng_);
      L.dsrc = dnnl::memory(src, eng_);
      L.ddst = dnnl::memory(dst, eng_);
      L.ws = dnnl::memory(L.fwd_pd.workspace_desc(), eng_);
      L.h0 = dnnl::memory(state, eng_);
      L.c0 = dnnl::memory(state, eng_);
      L.dh0 = dnnl::memory(state, eng_);
      L.dc0 = dnnl::memory(state, eng_);
      for (dnnl::memory* m : {&L.h0, &L.c0})
        std::fill_n(static_cast<float*>(m->get_data_handle()), m->get_desc().get_size() / 4, 0.0f);
      L.dw = dnnl::memory(L.bwd_pd.diff_weights_layer_desc(), eng_);
      L.dwi = dnnl::memory(L.bwd_pd.diff_weights_iter_desc(), eng_);
      L.db = dnnl::memory(L.bwd_pd.diff_bias_desc(), eng_);
      sh.layers.push_back(std::move(L));
    }
    s_.wait();
  }

  // Forward and backward over x (T x N x E, tnc) with output gradient dy (T x N x D*H): the layers'
  // outputs chained, the gradients back down. The weight gradients are those of this call (zeroed first).
  // Returns the seconds of the forward pass (the rest is the backward's).
  double run(int T, int N, const float* x, const float* dy) {
    const auto t0 = Clock::now();
    Shape& sh = shapes_.at({T, N});
    const size_t L = sh.layers.size();
    std::copy_n(x, size_t(T) * N * user_[0].in, static_cast<float*>(sh.layers[0].src.get_data_handle()));
    for (size_t l = 0; l < L; ++l) {
      Layer& y = sh.layers[l];
      if (l > 0) y.src.set_data_handle(sh.layers[l - 1].dst.get_data_handle());
      y.fwd.execute(s_, {{DNNL_ARG_SRC_LAYER, y.src}, {DNNL_ARG_SRC_ITER, y.h0}, {DNNL_ARG_SRC_ITER_C, y.c0},
                         {DNNL_ARG_WEIGHTS_LAYER, y.w_fwd}, {DNNL_ARG_WEIGHTS_ITER, y.wi_fwd},
                         {DNNL_ARG_BIAS, y.bias}, {DNNL_ARG_DST_LAYER, y.dst}, {DNNL_ARG_WORKSPACE, y.ws}});
    }
    s_.wait();
    const double forward = seconds(t0, Clock::now());
    const size_t top = size_t(T) * N * (c_.bidirectional ? 2 : 1) * c_.hidden;
    std::copy_n(dy, top, static_cast<float*>(sh.layers[L - 1].ddst.get_data_handle()));
    for (size_t k = L; k-- > 0;) {
      Layer& y = sh.layers[k];
      if (k + 1 < L) y.ddst.set_data_handle(sh.layers[k + 1].dsrc.get_data_handle());
      for (dnnl::memory* m : {&y.dw, &y.dwi, &y.db}) std::fill_n(static_cast<float*>(m->get_data_handle()), m->get_desc().get_size() / 4, 0.0f);
      y.bwd.execute(s_, {{DNNL_ARG_SRC_LAYER, y.src}, {DNNL_ARG_SRC_ITER, y.h0}, {DNNL_ARG_SRC_ITER_C, y.c0},
                         {DNNL_ARG_DIFF_SRC_ITER, y.dh0}, {DNNL_ARG_DIFF_SRC_ITER_C, y.dc0},
                         {DNNL_ARG_WEIGHTS_LAYER, y.w_bwd}, {DNNL_ARG_WEIGHTS_ITER, y.wi_bwd},
                         {DNNL_ARG_BIAS, y.bias}, {DNNL_ARG_DST_LAYER, y.dst}, {DNNL_ARG_DIFF_DST_LAYER, y.ddst},
                         {DNNL_ARG_DIFF_SRC_LAYER, y.dsrc}, {DNNL_ARG_DIFF_WEIGHTS_LAYER, y.dw},
                         {DNNL_ARG_DIFF_WEIGHTS_ITER, y.dwi}, {DNNL_ARG_DIFF_BIAS, y.db}, {DNNL_ARG_WORKSPACE, y.ws}});
    }
    s_.wait();
    return forward;
  }

  // After run(): the top layer's output, the input gradient, and a layer's weight gradients in PyTorch's
  // layout (the one bias gradient as both biases').
  std::vector<float> output(int T, int N) {
    const dnnl::memory& m = shapes_.at({T, N}).layers.back().dst;
    const auto* p = static_cast<const float*>(m.get_data_handle());
    return {p, p + m.get_desc().get_size() / 4};
  }
  std::vector<float> input_grad(int T, int N) {
    const dnnl::memory& m = shapes_.at({T, N}).layers.front().dsrc;
    const auto* p = static_cast<const float*>(m.get_data_handle());
    return {p, p + m.get_desc().get_size() / 4};
  }
  LayerWeights grads(int T, int N, int layer) {
    Layer& y = shapes_.at({T, N}).layers[size_t(layer)];
    const User& u = user_[size_t(layer)];
    auto to_user = [&](const dnnl::memory& m, const dnnl::memory::desc& md) {
      dnnl::memory out(md, eng_);
      dnnl::reorder(const_cast<dnnl::memory&>(m), out).execute(s_, const_cast<dnnl::memory&>(m), out);
      s_.wait();
      const auto* p = static_cast<const float*>(out.get_data_handle());
      return std::vector<float>(p, p + md.get_size() / 4);
    };
    LayerWeights g;
    g.w_ih = to_user(y.dw, u.w_ih_md);
    g.w_hh = to_user(y.dwi, u.w_hh_md);
    g.b_ih = to_user(y.db, u.bias_md);
    g.b_hh = g.b_ih;
    return g;
  }

 private:
  struct User {
    int in = 0;
    std::vector<float> w_ih, w_hh, bias;
    dnnl::memory::desc w_ih_md, w_hh_md, bias_md;
  };
  struct Layer {
    dnnl::lstm_forward::primitive_desc fwd_pd;
    dnnl::lstm_backward::primitive_desc bwd_pd;
    dnnl::lstm_forward fwd;
    dnnl::lstm_backward bwd;
    dnnl::memory w_fwd, wi_fwd, w_bwd, wi_bwd, bias, src, dst, dsrc, ddst, ws, dw, dwi, db, h0, c0, dh0, dc0;
  };
  struct Shape {
    std::vector<Layer> layers;
  };
  Config c_;
  dnnl::engine eng_;
  dnnl::stream s_;
  std::vector<User> user_;
  std::map<std::pair<int, int>, Shape> shapes_;
};

// Packed rows (time-major, nn/packing.h) of `width` values to T x N x width (tnc) with zero padding, for
// the sequences [b0, b0 + N) of the packing, all of which have at most T steps; and back.
std::vector<float> to_tnc(const Packing& p, const float* rows, int width, int b0, int N, int T) {
  std::vector<float> out(size_t(T) * N * width, 0.0f);
  for (int b = 0; b < N; ++b)
    for (int t = 0; t < p.lengths[size_t(b0 + b)]; ++t)
      std::copy_n(rows + p.row(t, b0 + b) * width, width, out.begin() + (size_t(t) * N + b) * width);
  return out;
}
void from_tnc(const Packing& p, const std::vector<float>& tnc, int width, int b0, int N, float* rows) {
  for (int b = 0; b < N; ++b)
    for (int t = 0; t < p.lengths[size_t(b0 + b)]; ++t)
      std::copy_n(tnc.begin() + (size_t(t) * N + b) * width, width, rows + p.row(t, b0 + b) * width);
}

// The runs of equal length in a packing (sequences sorted longest first): (first sequence, count).
std::vector<std::pair<int, int>> buckets(const Packing& p) {
  std::vector<std::pair<int, int>> out;
  for (int b = 0; b < p.batch(); ++b)
    if (b == 0 || p.lengths[size_t(b)] != p.lengths[size_t(b - 1)]) out.push_back({b, 1});
    else ++out.back().second;
  return out;
}

}  // namespace

int main(int argc, char** argv) try {
  if (argc < 3) throw InputError("usage: onednn_lstm FILE.h5 S|L|B [--steps N] [--threads T]");
  const std::string file_name = argv[1], config = argv[2];
  int steps = 8, threads = 1;
  for (int i = 3; i + 1 < argc; i += 2) {
    const std::string a = argv[i];
    if (a == "--steps") steps = std::atoi(argv[i + 1]);
    else if (a == "--threads") threads = std::atoi(argv[i + 1]);
    else throw InputError(cat("unknown option ", a));
  }
  if (steps < 1 || threads < 1) throw InputError("--steps and --threads must be >= 1");
  // oneDNN's OpenMP team: as many threads as rnn_dist's (OMP_NUM_THREADS is read when OpenMP loads).
  omp_set_num_threads(threads);
  Config c;
  if (config == "L") c.embed = 256, c.hidden = 1024, c.batch = 64;
  else if (config == "B") c.bidirectional = true;
  else if (config != "S") throw InputError("config: S, L or B");
  const int D = c.bidirectional ? 2 : 1, H = c.hidden;

  const double ceiling = bench::sgemm_gflops(1024, threads);
  const SequenceFile file = SequenceFile::open(file_name);
  if ((config == "B") != (file.task() == Task::classify))
    throw InputError(cat(file_name, ": ", task_name(file.task()), " data; config B takes classify data, the others lm data"));
  BatchingConfig bc;
  bc.batch_size = c.batch;
  const BatchCut cut = cut_global_batches(file.offsets(), bc, 1, framing_of(file.task()));
  if (cut.batches.size() < size_t(steps)) throw InputError(cat(file_name, ": too few batches for ", steps, " steps"));
  // Batches taken evenly across the length-sorted file, as train_throughput takes them.
  std::vector<Packing> packings;
  for (int k = 0; k < steps; ++k) {
    const SliceRange& s = cut.batches[size_t(k) * cut.batches.size() / size_t(steps)].slices[0];
    std::vector<int> lengths;
    for (int64_t i = s.begin; i < s.end; ++i) lengths.push_back(int(file.length(i) - framing_of(file.task())));
    packings.push_back(Packing::from_lengths(lengths));
  }

  std::vector<LayerWeights> layers;
  const double bound = 1.0 / std::sqrt(double(H));
  for (int l = 0; l < c.layers; ++l) {
    LayerWeights w;
    w.in = l == 0 ? c.embed : D * H;
    w.w_ih = random_floats(size_t(D) * 4 * H * w.in, 10 + l, bound);
    w.w_hh = random_floats(size_t(D) * 4 * H * H, 20 + l, bound);
    w.b_ih = random_floats(size_t(D) * 4 * H, 30 + l, bound);
    w.b_hh = random_floats(size_t(D) * 4 * H, 40 + l, bound);
    layers.push_back(std::move(w));
  }
  auto cpu = make_backend(DeviceType::cpu, 0, threads);
  OursLstm ours(*cpu, c, layers);
  OneDnnLstm theirs(c, layers);
  int64_t max_rows = 0;
  for (const Packing& p : packings) max_rows = std::max(max_rows, p.rows());
  const std::vector<float> x = random_floats(size_t(max_rows) * c.embed, 1, 1.0), dy = random_floats(size_t(max_rows) * D * H, 2, 1e-2);
  std::vector<float> y(size_t(max_rows) * D * H), dx(size_t(max_rows) * c.embed), dw(ours.weights().size());
  // Returns the seconds of the forward pass, as OneDnnLstm::run does.
  auto ours_pass = [&](const Packing& p) {
    const auto t0 = Clock::now();
    ours.lstm().forward(ours.weights().data(), p, x.data(), nullptr, nullptr, y.data(), nullptr, nullptr, true, 0);
    const double forward = seconds(t0, Clock::now());
    ours.lstm().backward(ours.weights().data(), dy.data(), nullptr, nullptr, dx.data(), nullptr, nullptr, dw.data());
    return forward;
  };
  // The padded tnc copies of every batch, made before timing (a user of oneDNN holds them).
  struct Padded {
    int T, N;
    std::vector<float> x, dy;
  };
  std::vector<Padded> padded;
  std::vector<std::vector<Padded>> bucketed;
  for (const Packing& p : packings) {
    const int T = p.lengths[0], N = p.batch();
    padded.push_back({T, N, to_tnc(p, x.data(), c.embed, 0, N, T), to_tnc(p, dy.data(), D * H, 0, N, T)});
    theirs.prepare(T, N);
    std::vector<Padded> bs;
    for (auto [b0, n] : buckets(p)) {
      const int t = p.lengths[size_t(b0)];
      bs.push_back({t, n, to_tnc(p, x.data(), c.embed, b0, n, t), to_tnc(p, dy.data(), D * H, b0, n, t)});
      theirs.prepare(t, n);
    }
    bucketed.push_back(std::move(bs));
  }

  // The check, on the first batch: ours against oneDNN's buckets (exact for both directions) and, for
  // one direction, against its padded run.
  {
    const Packing& p = packings[0];
    std::fill(dw.begin(), dw.end(), 0.0f);
    ours_pass(p);
    const size_t rows = size_t(p.rows());
    const std::vector<float> our_y(y.begin(), y.begin() + rows * D * H), our_dx(dx.begin(), dx.begin() + rows * c.embed);
    std::vector<LayerWeights> our_g;
    for (int l = 0; l < c.layers; ++l) our_g.push_back(ours.grads(dw, l));
    double worst = 0;
    std::string worst_what;
    auto compare = [&](const std::vector<float>& got, const std::vector<float>& want, const std::string& what) {
      const double e = relative_error(got, want);
      if (e > worst) worst = e, worst_what = what;
    };
    auto compare_grads = [&](const std::vector<LayerWeights>& got, const std::string& how) {
      for (int l = 0; l < c.layers; ++l) {
        const LayerWeights& g = got[size_t(l)];
        const LayerWeights& w = our_g[size_t(l)];
        std::vector<float> wb(w.b_ih.size());
        for (size_t i = 0; i < wb.size(); ++i) wb[i] = w.b_ih[i];  // each bias's gradient is the gates'
        compare(g.w_ih, w.w_ih, cat(how, " dweight_ih_l", l));
        compare(g.w_hh, w.w_hh, cat(how, " dweight_hh_l", l));
        compare(g.b_ih, wb, cat(how, " dbias_l", l));
      }
    };
    // Buckets: outputs and input gradients scattered back to packed rows, weight gradients summed.
    std::vector<float> by(rows * D * H), bdx(rows * c.embed);
    std::vector<LayerWeights> bg(size_t(c.layers));
    int b0 = 0;
    for (const Padded& b : bucketed[0]) {
      theirs.run(b.T, b.N, b.x.data(), b.dy.data());
      from_tnc(p, theirs.output(b.T, b.N), D * H, b0, b.N, by.data());
      from_tnc(p, theirs.input_grad(b.T, b.N), c.embed, b0, b.N, bdx.data());
      for (int l = 0; l < c.layers; ++l) {
        const LayerWeights g = theirs.grads(b.T, b.N, l);
        LayerWeights& sum = bg[size_t(l)];
        if (sum.w_ih.empty()) sum = g;
        else
          for (auto [to, from] : {std::pair{&sum.w_ih, &g.w_ih}, {&sum.w_hh, &g.w_hh}, {&sum.b_ih, &g.b_ih}})
            for (size_t i = 0; i < to->size(); ++i) (*to)[i] += (*from)[i];
      }
      b0 += b.N;
    }
    compare(by, our_y, "buckets y");
    compare(bdx, our_dx, "buckets dx");
    compare_grads(bg, "buckets");
    if (!c.bidirectional) {
      const Padded& b = padded[0];
      theirs.run(b.T, b.N, b.x.data(), b.dy.data());
      std::vector<float> py(rows * D * H), pdx(rows * c.embed);
      from_tnc(p, theirs.output(b.T, b.N), D * H, 0, b.N, py.data());
      from_tnc(p, theirs.input_grad(b.T, b.N), c.embed, 0, b.N, pdx.data());
      compare(py, our_y, "padded y");
      compare(pdx, our_dx, "padded dx");
      std::vector<LayerWeights> pg;
      for (int l = 0; l < c.layers; ++l) pg.push_back(theirs.grads(b.T, b.N, l));
      compare_grads(pg, "padded");
    }
    std::cout << "check: rnn_dist against oneDNN on the first batch (" << p.batch() << " sequences, " << rows
              << " rows): largest relative difference " << worst << " (" << worst_what << ")" << std::endl;
    if (!(worst <= 1e-4)) {
      std::cout << "onednn_lstm: VOID (the implementations disagree beyond 1e-4)" << std::endl;
      return 1;
    }
  }

  // Timed batch by batch: each round runs every implementation on batch 0, then on batch 1, and so on, and
  // a batch's time is its best over the rounds (after one untimed round). A disturbance of a second or
  // two then costs one batch of one round, not a whole pass: timed pass by pass, oneDNN's totals moved by
  // up to 25% between runs of the same code (docs/benchmarks.md, session 16).
  // rnn_dist is also timed with the weight gradients on the other of its two kernels (cpu_kernels.h,
  // weight_gradients()), so that the run shows whether the choice made for this CPU was the faster.
  const cpu::WeightGradients chosen = cpu::weight_gradients();
  const cpu::WeightGradients other =
      chosen == cpu::WeightGradients::packed ? cpu::WeightGradients::blas : cpu::WeightGradients::packed;
  // Each timing: the whole pass and its forward part; a batch's best of each over the rounds.
  struct Best {
    std::vector<double> pass, forward, backward;
    explicit Best(size_t n) : pass(n, 1e30), forward(n, 1e30), backward(n, 1e30) {}
    void add(size_t i, double t, double f) {
      pass[i] = std::min(pass[i], t), forward[i] = std::min(forward[i], f), backward[i] = std::min(backward[i], t - f);
    }
  };
  // Each pass starts with the other implementation's threads asleep: after a parallel region, OpenMP's
  // workers spin for ~8 ms (GOMP_SPINCOUNT's 300000 pauses) and rnn_dist's team for ~1 ms, and a pass
  // that began while the other's threads still spun lost a core to them: rnn_dist's S on 2 threads ran at
  // 0.70 of sgemm next to oneDNN, 0.91 with OpenMP's spinning bounded (docs/benchmarks.md, session 26).
  auto timed = [](auto&& fn) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    const auto t0 = Clock::now();
    const double forward = fn();
    return std::pair{seconds(t0, Clock::now()), forward};
  };
  const size_t nb = packings.size();
  Best b_ours(nb), b_padded(nb), b_buckets(nb), b_other(nb);
  constexpr int kRounds = 3;
  for (int round = 0; round <= kRounds; ++round)
    for (size_t i = 0; i < nb; ++i) {
      const auto ours = timed([&] { return ours_pass(packings[i]); });
      const auto pad = timed([&] { return theirs.run(padded[i].T, padded[i].N, padded[i].x.data(), padded[i].dy.data()); });
      const auto buckets = timed([&] {
        double forward = 0;
        for (const Padded& b : bucketed[i]) forward += theirs.run(b.T, b.N, b.x.data(), b.dy.data());
        return forward;
      });
      cpu::set_weight_gradients(other);
      const auto oth = timed([&] { return ours_pass(packings[i]); });
      cpu::set_weight_gradients(chosen);
      if (round == 0) continue;  // the untimed round
      b_ours.add(i, ours.first, ours.second);
      b_padded.add(i, pad.first, pad.second);
      b_buckets.add(i, buckets.first, buckets.second);
      b_other.add(i, oth.first, oth.second);
    }
  auto total = [](const std::vector<double>& v) {
    double t = 0;
    for (double x : v) t += x;
    return t;
  };
  const double t_ours = total(b_ours.pass), t_padded = total(b_padded.pass), t_buckets = total(b_buckets.pass),
               t_other = total(b_other.pass);
  int64_t rows = 0, padded_rows = 0;
  for (const Packing& p : packings) rows += p.rows(), padded_rows += int64_t(p.lengths[0]) * p.batch();
  const double work = 3 * forward_flops(c, rows), padded_work = 3 * forward_flops(c, padded_rows);
  auto line = [&](const char* what, double t, double flops) {
    std::printf("%-30s %9.1f ms  %7.0f rows/s  %6.1f GFLOP/s  %.3f of sgemm\n", what, 1e3 * t, double(rows) / t,
                flops / t / 1e9, flops / t / 1e9 / ceiling);
  };
  std::printf("config %s: E=%d H=%d L=%d %s, %d batches of %d sequences (%lld rows, %.1f%% padding), %d thread(s); "
              "sgemm %.1f GFLOP/s, %s\n", config.c_str(), c.embed, H, c.layers, c.bidirectional ? "bidirectional" : "unidirectional",
              steps, c.batch, static_cast<long long>(rows), 100.0 * double(padded_rows - rows) / double(padded_rows), threads,
              ceiling, cpu->device_name().c_str());
  auto name = [](cpu::WeightGradients w) { return w == cpu::WeightGradients::packed ? "packed kernel" : "OpenBLAS"; };
  line("rnn_dist (packed)", t_ours, work);
  line(cat("rnn_dist, dW on ", name(other)).c_str(), t_other, work);
  line("oneDNN padded", t_padded, padded_work);
  line("oneDNN length buckets", t_buckets, work);
  std::printf("rnn_dist / oneDNN: %.2fx padded, %.2fx buckets (time ratio: above 1, rnn_dist is faster)\n",
              t_padded / t_ours, t_buckets / t_ours);
  // Where the difference is: each part's time, its batches' best over the rounds (oneDNN's backward
  // multiplies its weight gradients inside, so they are not apart).
  std::printf("forward, backward (ms): rnn_dist %.1f, %.1f; oneDNN padded %.1f, %.1f; buckets %.1f, %.1f; "
              "rnn_dist / oneDNN forward %.2fx, %.2fx, backward %.2fx, %.2fx (padded, buckets)\n",
              1e3 * total(b_ours.forward), 1e3 * total(b_ours.backward), 1e3 * total(b_padded.forward),
              1e3 * total(b_padded.backward), 1e3 * total(b_buckets.forward), 1e3 * total(b_buckets.backward),
              total(b_padded.forward) / total(b_ours.forward), total(b_buckets.forward) / total(b_ours.forward),
              total(b_padded.backward) / total(b_ours.backward), total(b_buckets.backward) / total(b_ours.backward));
  std::printf("weight gradients on the %s (this CPU's choice): %.2fx rnn_dist with them on the %s (%s)\n",
              name(chosen), t_other / t_ours, name(other), cpu::blas_kernels().c_str());
  return 0;
} catch (const std::exception& e) {
  std::cerr << "onednn_lstm: " << e.what() << std::endl;
  return 2;
}

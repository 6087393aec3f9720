// The packed kernel alone (cpu/packed_gemm.h), every variant this CPU runs, at the LSTM's shapes, beside
// OpenBLAS's sgemm on the same products: which variant is the fastest on this host, and whether it is the
// one the kernel takes here (variant -1); then the weight gradients (packed_gemm_tn) beside OpenBLAS's,
// the two choices of cpu_kernels.h's weight_gradients(). Each variant's C is checked against OpenBLAS's
// (1e-4 relative to the largest |C|), or the run is void (exit 1).
//
//   packed_gemm_bench
//
// One thread; each figure is the best of 5 windows of 50 ms (at least one product each), the variants and
// OpenBLAS interleaved window by window, so that a disturbance costs a window, not a column.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <iostream>
#include <random>
#include <vector>

#include "rnn_dist/cpu/blas_kernels.h"
#include "rnn_dist/cpu/cpu_kernels.h"
#include "rnn_dist/cpu/packed_gemm.h"
#include "rnn_dist/util/error.h"

extern "C" void openblas_set_num_threads(int);

namespace {

using namespace rnn_dist;
using Clock = std::chrono::steady_clock;

// One product of the LSTM: M rows of A by `blocks` B's of n x k (the time loop's four gate blocks), or
// one B (the layer-wide products).
struct Shape {
  const char* name;
  int m, n, k, blocks;
};
// S: E 64, H 256, batch 32; L: E 256, H 1024, batch 64 (bench/train_throughput's configurations).
constexpr Shape kShapes[] = {
    {"S recurrent (32 x 4 x 256, K 256)", 32, 256, 256, 4},
    {"S recurrent, a member of 2 (4 x 128)", 32, 128, 256, 4},
    {"S input projection (K 64)", 6000, 1024, 64, 1},
    {"L recurrent (64 x 4 x 1024, K 1024)", 64, 1024, 1024, 4},
    // 768 rows: 4 blocks of rows of a layer's ~6000, in the same order of the product.
    {"L input projection, layer 0 (K 256)", 768, 4096, 256, 1},
    {"L input projection, layer 1 (K 1024)", 768, 4096, 1024, 1},
    {"L dx (K 4096)", 768, 1024, 4096, 1},
};
// The weight gradients of a layer: m = 4H rows of dW, n = its input's width, k = H (blocks unused).
constexpr Shape kGradientShapes[] = {
    {"S dW, layer 0 (4H 1024, I 64, H 256)", 1024, 64, 256, 1},
    {"S dW, layer 1 (4H 1024, I 256, H 256)", 1024, 256, 256, 1},
    {"L dW, layer 0 (4H 4096, I 256, H 1024)", 4096, 256, 1024, 1},
    {"L dW, layer 1 (4H 4096, I 1024, H 1024)", 4096, 1024, 1024, 1},
};

double seconds(Clock::time_point a, Clock::time_point b) { return std::chrono::duration<double>(b - a).count(); }

// The product's rate over one window of `window` seconds.
template <class F>
double rate(F&& product, double flops, double window) {
  int reps = 0;
  const auto t0 = Clock::now();
  do {
    product();
    ++reps;
  } while (seconds(t0, Clock::now()) < window);
  return flops * reps / seconds(t0, Clock::now()) / 1e9;
}

}  // namespace

int main(int argc, char**) try {
  if (argc > 1) throw InputError("usage: packed_gemm_bench (no options)");
  constexpr int kRounds = 5;
  constexpr double kWindow = 0.05;
  openblas_set_num_threads(1);
  const int variants = cpu::packed_gemm_variants(), chosen = cpu::packed_gemm_best_variant();
  std::printf("packed kernel alone, 1 thread, %s; GFLOP/s, each the best of %d windows of %.0f ms\n",
              cpu::blas_kernels().c_str(), kRounds, 1e3 * kWindow);
  std::printf("%-40s", "shape");
  for (int v = 0; v < variants; ++v) std::printf(" %26s", cpu::packed_gemm_variant_name(v));
  std::printf(" %10s\n", "OpenBLAS");
  std::mt19937 rng(29);
  std::uniform_real_distribution<float> dist(-1, 1);
  auto random = [&](size_t n) {
    std::vector<float> v(n);
    for (float& x : v) x = dist(rng);
    return v;
  };
  // One row of the table: each variant's product (ours(v), into got) checked against OpenBLAS's (into
  // want), then timed; false where one disagrees. Each variant's time is added to `time`.
  std::vector<double> time(size_t(variants), 0.0);  // each variant's seconds over one of every shape
  auto row = [&](const char* name, double flops, auto&& ours, auto&& openblas, std::vector<float>& got,
                 const std::vector<float>& want) {
    openblas();
    const float scale = std::abs(*std::max_element(want.begin(), want.end(), [](float x, float y) {
      return std::abs(x) < std::abs(y);
    }));
    for (int v = 0; v < variants; ++v) {
      std::fill(got.begin(), got.end(), 0.0f);
      ours(v);
      double worst = 0;
      for (size_t e = 0; e < got.size(); ++e) worst = std::max(worst, double(std::abs(got[e] - want[e])));
      if (!(worst <= 1e-4 * scale)) {
        std::printf("packed_gemm_bench: VOID (%s on %s: |C - OpenBLAS's| %g of %g)\n", cpu::packed_gemm_variant_name(v),
                    name, worst, double(scale));
        return false;
      }
    }
    std::vector<double> best(size_t(variants) + 1, 0.0);
    for (int round = 0; round < kRounds; ++round) {
      for (int v = 0; v < variants; ++v) best[size_t(v)] = std::max(best[size_t(v)], rate([&] { ours(v); }, flops, kWindow));
      best[size_t(variants)] = std::max(best[size_t(variants)], rate(openblas, flops, kWindow));
    }
    std::printf("%-40s", name);
    for (int v = 0; v <= variants; ++v) std::printf(" %*.1f", v < variants ? 26 : 10, best[size_t(v)]);
    std::printf("\n");
    for (int v = 0; v < variants; ++v) time[size_t(v)] += flops / (best[size_t(v)] * 1e9);
    return true;
  };
  for (const Shape& s : kShapes) {
    const int width = s.n * s.blocks;
    const auto a = random(size_t(s.m) * s.k), w = random(size_t(width) * s.k);  // W: width x k, y = A W^T
    const int64_t stride = int64_t(cpu::packed_elems(s.k, s.n));
    std::vector<float> packed(size_t(stride) * s.blocks);
    for (int q = 0; q < s.blocks; ++q)
      cpu::pack_b(w.data() + size_t(q) * s.n * s.k, 1, s.k, s.k, s.n, packed.data() + q * stride);
    std::vector<float> want(size_t(s.m) * width), got(want.size());
    auto openblas = [&] {
      cpu::gemm<float>(false, true, s.m, width, s.k, 1.0f, a.data(), s.k, w.data(), s.k, 0.0f, want.data(), width);
    };
    auto ours = [&](int v) {
      cpu::packed_gemm_blocks(s.m, s.n, s.k, a.data(), s.k, s.blocks, packed.data(), stride, false, got.data(), width,
                              s.n, v);
    };
    if (!row(s.name, 2.0 * s.m * double(width) * s.k, ours, openblas, got, want)) return 1;
  }
  // The weight gradients, dW_ih and dW_hh (4H x I and 4H x H) += dG^T [x, h] in one pass (packed_gemm_tn),
  // over 1536 of a layer's rows: OpenBLAS's here is the other choice of weight_gradients() (cpu_kernels.h).
  std::printf("weight gradients (packed_gemm_tn, K blocks of up to %d rows; the packed kernel's are %s)\n",
              cpu::packed_gemm_tn_tallest_rows(), cpu::packed_gemm_long_k_blocks() ? "taken here" : "not taken here");
  for (const Shape& s : kGradientShapes) {
    const int G = s.m, I = s.n, H = s.k, rows = 1536;  // Shape's fields as 4H, I and H
    const auto dg = random(size_t(rows) * G), x = random(size_t(rows) * I), h = random(size_t(rows) * H);
    std::vector<float> want(size_t(G) * (I + H)), got(want.size());
    std::vector<float> scratch(cpu::packed_gemm_tn_scratch_elems({I, H}));
    auto openblas = [&] {
      cpu::gemm<float>(true, false, G, I, rows, 1.0f, dg.data(), G, x.data(), I, 0.0f, want.data(), I);
      cpu::gemm<float>(true, false, G, H, rows, 1.0f, dg.data(), G, h.data(), H, 0.0f, want.data() + size_t(G) * I, H);
    };
    auto ours = [&](int v) {
      const cpu::TnProduct products[] = {{x.data(), I, I, got.data(), I}, {h.data(), H, H, got.data() + size_t(G) * I, H}};
      cpu::packed_gemm_tn(G, rows, dg.data(), G, products, scratch.data(), scratch.size(), v);
    };
    if (!row(s.name, 2.0 * G * double(I + H) * rows, ours, openblas, got, want)) return 1;
  }
  const int fastest = int(std::min_element(time.begin(), time.end()) - time.begin());
  std::printf("one of each shape: %s %.3f ms", cpu::packed_gemm_variant_name(chosen), 1e3 * time[size_t(chosen)]);
  for (int v = 0; v < variants; ++v)
    if (v != chosen) std::printf(", %s %.2fx its time", cpu::packed_gemm_variant_name(v), time[size_t(v)] / time[size_t(chosen)]);
  std::printf("\nthis CPU takes %s; the fastest here: %s\n", cpu::packed_gemm_variant_name(chosen),
              cpu::packed_gemm_variant_name(fastest));
  return 0;
} catch (const std::exception& e) {
  std::cerr << "packed_gemm_bench: " << e.what() << std::endl;
  return 2;
}

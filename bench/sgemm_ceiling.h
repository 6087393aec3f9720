// The machine's own sgemm rate, the ceiling the CPU benchmarks report their GFLOP/s against
// (train_throughput, onednn_lstm): the faster of OpenBLAS's and rnn_dist's packed kernel.
#pragma once

#include <algorithm>
#include <chrono>
#include <cmath>
#include <vector>

#include "rnn_dist/cpu/cpu_kernels.h"
#include "rnn_dist/cpu/packed_gemm.h"
#include "rnn_dist/cpu/team.h"
#include "rnn_dist/util/error.h"

extern "C" void openblas_set_num_threads(int);

namespace rnn_dist::bench {

inline double seconds(std::chrono::steady_clock::time_point a, std::chrono::steady_clock::time_point b) {
  return std::chrono::duration<double>(b - a).count();
}

// The faster of two square products (n x n, A·Bᵀ) on `threads` threads: OpenBLAS's own (multi-threaded)
// sgemm, and rnn_dist's packed kernel (cpu/packed_gemm.h, B packed once, the rows shared by a thread
// team). This rank's share of the ceiling. The packed kernel is the faster only where OpenBLAS runs
// kernels narrower than the CPU's (AVX2 on an AVX-512 CPU: 200 against 105 GFLOP/s on one core of the
// Zen 5 of docs/benchmarks.md's session 15, where OpenBLAS's AVX-512 kernels give 209), and rnn_dist's own
// products run at that rate there. Each the best of five 0.4 s windows, interleaved, since the machine's
// rate is what a window free of other work reaches. The benchmarks print the CPU backend's name beside it,
// which says which OpenBLAS kernels run.
inline double sgemm_gflops(int n, int threads) {
  openblas_set_num_threads(threads);
  std::vector<float> a(size_t(n) * n, 0.5f), b(size_t(n) * n, 0.25f), c(size_t(n) * n, 0.0f), d(c);
  std::vector<float> packed(cpu::packed_elems(n, n));
  cpu::pack_b(b.data(), 1, n, n, n, packed.data());
  auto openblas = [&] { cpu::gemm<float>(false, true, n, n, n, 1.0f, a.data(), n, b.data(), n, 0.0f, c.data(), n); };
  cpu::Team team(threads);
  auto own = [&] {
    team.run([&](int t) {
      const int r0 = int(int64_t(n) * t / threads), r1 = int(int64_t(n) * (t + 1) / threads);
      cpu::packed_gemm(r1 - r0, n, n, a.data() + int64_t(r0) * n, n, packed.data(), false, d.data() + int64_t(r0) * n, n);
    });
  };
  auto rate = [&](auto&& product) {
    int reps = 0;
    auto t0 = std::chrono::steady_clock::now();
    while (seconds(t0, std::chrono::steady_clock::now()) < 0.4) {
      product();
      ++reps;
    }
    return 2.0 * n * n * double(n) * reps / seconds(t0, std::chrono::steady_clock::now()) / 1e9;
  };
  openblas(), own();  // warm-up
  double best = 0;
  for (int window = 0; window < 5; ++window) best = std::max({best, rate(openblas), rate(own)});
  if (std::abs(c[0] - 0.125f * n) > 1e-3f * n || std::abs(d.back() - 0.125f * n) > 1e-3f * n)
    throw Error("sgemm check failed");
  return best;
}

}  // namespace rnn_dist::bench

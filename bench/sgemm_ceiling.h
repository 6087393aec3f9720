// The machine's own sgemm rate, the ceiling the CPU benchmarks report their GFLOP/s against
// (train_throughput, onednn_lstm).
#pragma once

#include <algorithm>
#include <chrono>
#include <cmath>
#include <vector>

#include "rnn_dist/cpu/cpu_kernels.h"
#include "rnn_dist/util/error.h"

extern "C" void openblas_set_num_threads(int);

namespace rnn_dist::bench {

inline double seconds(std::chrono::steady_clock::time_point a, std::chrono::steady_clock::time_point b) {
  return std::chrono::duration<double>(b - a).count();
}

// OpenBLAS's own (multi-threaded) sgemm on square matrices (A·Bᵀ): this rank's share of the ceiling. The
// best of five 0.4 s windows, since the machine's rate is what a window free of other work reaches. The
// benchmarks print the CPU backend's name beside it, which says which OpenBLAS kernels run.
inline double sgemm_gflops(int n, int threads) {
  openblas_set_num_threads(threads);
  std::vector<float> a(size_t(n) * n, 0.5f), b(size_t(n) * n, 0.25f), c(size_t(n) * n, 0.0f);
  cpu::gemm<float>(false, true, n, n, n, 1.0f, a.data(), n, b.data(), n, 0.0f, c.data(), n);  // warm-up
  double best = 0;
  for (int window = 0; window < 5; ++window) {
    int reps = 0;
    auto t0 = std::chrono::steady_clock::now();
    while (seconds(t0, std::chrono::steady_clock::now()) < 0.4) {
      cpu::gemm<float>(false, true, n, n, n, 1.0f, a.data(), n, b.data(), n, 0.0f, c.data(), n);
      ++reps;
    }
    best = std::max(best, 2.0 * n * n * double(n) * reps / seconds(t0, std::chrono::steady_clock::now()) / 1e9);
  }
  if (std::abs(c[0] - 0.125f * n) > 1e-3f * n) throw Error("sgemm check failed");
  return best;
}

}  // namespace rnn_dist::bench

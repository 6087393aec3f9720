// OpenBLAS's products at rnn_dist's shapes with its work buffers as a fresh process has them, then primed
// by cpu::prime_blas_buffers (issue 29): the T members of a team each multiply their share of C's rows at
// once, as the CPU backend's kernels do, first in the fresh process and then after priming. The two
// results must be bitwise equal and agree with a double loop at sampled entries, or the line is void.
//   blas_buffers TA TB M N K [--threads T]   (row-major C (M x N) = op(A) op(B), op = transpose where 1)
#include <cblas.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <string>
#include <vector>

#include "rnn_dist/cpu/blas_kernels.h"
#include "rnn_dist/cpu/team.h"

extern "C" void openblas_set_num_threads(int);

using namespace rnn_dist;

int main(int argc, char** argv) {
  if (argc != 6 && !(argc == 8 && std::string(argv[6]) == "--threads")) {
    std::fprintf(stderr, "usage: blas_buffers TA TB M N K [--threads T]\n");
    return 2;
  }
  const bool ta = std::atoi(argv[1]) != 0, tb = std::atoi(argv[2]) != 0;
  const int m = std::atoi(argv[3]), n = std::atoi(argv[4]), k = std::atoi(argv[5]);
  const int threads = argc == 8 ? std::atoi(argv[7]) : 1;
  openblas_set_num_threads(1);  // as the CPU backend runs it: single-threaded inside each member
  std::vector<float> a(size_t(m) * k), b(size_t(k) * n), cold(size_t(m) * n), primed(cold.size());
  std::mt19937 rng(29);
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  for (float& v : a) v = u(rng);
  for (float& v : b) v = u(rng);
  const int lda = ta ? m : k, ldb = tb ? k : n;
  cpu::Team team(threads);
  // GFLOP/s of the team computing C for at least 0.5 s (each member its rows; A's rows are its columns when
  // transposed).
  auto rate = [&](std::vector<float>& c) {
    int reps = 0;
    const auto t0 = std::chrono::steady_clock::now();
    double s = 0;
    do {
      team.run([&](int member) {
        const auto [r0, r1] = cpu::share(m, threads, member);
        const float* a0 = a.data() + (ta ? r0 : r0 * lda);
        cblas_sgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans, int(r1 - r0), n, k,
                    1.0f, a0, lda, b.data(), ldb, 0.0f, c.data() + r0 * n, n);
      });
      ++reps;
      s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    } while (s < 0.5);
    return 2.0 * m * n * double(k) * reps / s / 1e9;
  };
  const double fresh = rate(cold);
  cpu::prime_blas_buffers(team);
  const double after = rate(primed);
  if (cold != primed) {
    std::fprintf(stderr, "blas_buffers: the products before and after priming differ\n");
    return 1;
  }
  double worst = 0;
  for (int s = 0; s < 64; ++s) {
    const int i = int(rng() % unsigned(m)), j = int(rng() % unsigned(n));
    double want = 0, scale = 0;
    for (int l = 0; l < k; ++l) {
      const double x = a[ta ? size_t(l) * lda + i : size_t(i) * lda + l], y = b[tb ? size_t(j) * ldb + l : size_t(l) * ldb + j];
      want += x * y;
      scale += std::abs(x * y);
    }
    worst = std::max(worst, std::abs(primed[size_t(i) * n + j] - want) / scale);
  }
  if (worst > 1e-5) {
    std::fprintf(stderr, "blas_buffers: %g relative to the double loop\n", worst);
    return 1;
  }
  std::printf("%s%s %5d x %5d x %5d, %d thread(s): fresh %5.1f GFLOP/s, primed %5.1f, primed / fresh %.2f (%s)\n",
              ta ? "T" : "N", tb ? "T" : "N", m, n, k, threads, fresh, after, after / fresh, cpu::blas_kernels().c_str());
  return 0;
}

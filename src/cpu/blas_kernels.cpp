// The OpenBLAS kernels in use, as the CPU backend's name and the benchmarks report them, and OpenBLAS's
// work buffers primed.
#include "rnn_dist/cpu/blas_kernels.h"

#include <cblas.h>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <mutex>
#include <vector>

#include "rnn_dist/cpu/team.h"
#include "rnn_dist/util/error.h"

extern "C" char* openblas_get_corename(void);

namespace rnn_dist::cpu {

bool leaves_avx512_unused(const std::string& core, bool cpu_has_avx512) {
  // OpenBLAS's AVX-512 kernel sets; a build for one CPU names its core in capitals.
  std::string name = core;
  std::transform(name.begin(), name.end(), name.begin(), [](unsigned char c) { return std::tolower(c); });
  return cpu_has_avx512 && name != "skylakex" && name != "cooperlake" && name != "sapphirerapids";
}

bool blas_kernels_leave_avx512_unused() {
  __builtin_cpu_init();
  // The SkylakeX kernels' instruction sets; GCC's checks include the OS's (XCR0 saves the ZMM state).
  const bool avx512 = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512cd") &&
                      __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512dq") &&
                      __builtin_cpu_supports("avx512vl");
  return leaves_avx512_unused(openblas_get_corename(), avx512);
}

std::string blas_kernels() {
  std::string s = cat("OpenBLAS ", openblas_get_corename(), " kernels");
  if (blas_kernels_leave_avx512_unused())
    s += ": narrower than this CPU's AVX-512; OPENBLAS_CORETYPE=SkylakeX selects OpenBLAS's AVX-512 kernels";
  return s;
}

int prime_blas_buffers(Team& team) {
  static std::mutex mutex;
  static int primed = 0;
  const std::lock_guard<std::mutex> lock(mutex);
  const int members = team.size();
  if (members <= primed) return primed;
  constexpr int m = 64, n = 1024, k = 1024, kMaxCalls = 8;
  const std::vector<float> a(size_t{m} * k), b(size_t{k} * n);
  std::vector<float> c(size_t{m} * n * members);
  std::atomic<int> inside{0};
  std::atomic<bool> together{members == 1};
  team.run([&](int member) {
    for (int call = 0; call < kMaxCalls && (call == 0 || !together.load()); ++call) {
      if (inside.fetch_add(1) + 1 == members) together.store(true);
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, m, n, k, 1.0f, a.data(), k, b.data(), n, 0.0f,
                  c.data() + size_t{m} * n * member, n);
      inside.fetch_sub(1);
    }
  });
  if (together.load()) primed = members;
  return primed;
}

}  // namespace rnn_dist::cpu

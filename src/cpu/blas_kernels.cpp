// The OpenBLAS kernels in use, as the CPU backend's name and the benchmarks report them.
#include "rnn_dist/cpu/blas_kernels.h"

#include <algorithm>
#include <cctype>

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

}  // namespace rnn_dist::cpu

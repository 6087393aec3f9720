// The OpenBLAS kernels in use, as the CPU backend's name and the benchmarks report them.
#include "rnn_dist/cpu/blas_kernels.h"

#include "rnn_dist/util/error.h"

extern "C" char* openblas_get_corename(void);

namespace rnn_dist::cpu {

bool blas_kernels_leave_avx512_unused() {
  const std::string core = openblas_get_corename();
  // The SkylakeX kernels' instruction sets; GCC's checks include the OS's (XCR0 saves the ZMM state).
  const bool avx512 = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512cd") &&
                      __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512dq") &&
                      __builtin_cpu_supports("avx512vl");
  return (core == "Haswell" || core == "Zen") && avx512;
}

std::string blas_kernels() {
  std::string s = cat("OpenBLAS ", openblas_get_corename(), " kernels");
  if (blas_kernels_leave_avx512_unused())
    s += ": AVX2 on a CPU with AVX-512; OPENBLAS_CORETYPE=SkylakeX selects OpenBLAS's AVX-512 kernels";
  return s;
}

}  // namespace rnn_dist::cpu

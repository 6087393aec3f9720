// Which OpenBLAS kernels the CPU backend's products run on, and whether they leave the CPU's AVX-512
// unused.
#pragma once

#include <string>

namespace rnn_dist::cpu {

// OpenBLAS built for several CPUs (Debian's DYNAMIC_ARCH) picks its kernels by the CPU model it
// recognises, or by OPENBLAS_CORETYPE. 0.3.21 takes an AMD Zen 4 or 5 for a Haswell and runs AVX2 kernels
// at half the rate of its AVX-512 ones there (docs/benchmarks.md, session 15). rnn_dist leaves the choice
// to OpenBLAS and the user (some environments force a core type because an older OpenBLAS is wrong on
// their CPU) and says what runs: "OpenBLAS Haswell kernels", followed, where they are AVX2 kernels on a
// CPU with AVX-512, by ": AVX2 on a CPU with AVX-512" and the setting that would use it.
std::string blas_kernels();
// Whether those kernels are AVX2 ones (Haswell, Zen) on a CPU with AVX-512 (F, CD, BW, DQ, VL).
bool blas_kernels_leave_avx512_unused();

}  // namespace rnn_dist::cpu

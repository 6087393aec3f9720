// Which OpenBLAS kernels the CPU backend's products run on, and whether they leave the CPU's AVX-512
// unused.
#pragma once

#include <string>

namespace rnn_dist::cpu {

// OpenBLAS built for several CPUs (Debian's DYNAMIC_ARCH) picks its kernels by the CPU model it
// recognises, or by OPENBLAS_CORETYPE. 0.3.21 knows no AMD CPU with AVX-512 (it gives a Zen 4 its Zen
// kernels, AVX2 ones), and its AVX2 kernels run at half the rate of its AVX-512 ones on the Zen 5 of
// docs/benchmarks.md's session 15. rnn_dist leaves the choice to OpenBLAS and the user (some environments
// force a core type because an older OpenBLAS is wrong on their CPU) and says what runs: "OpenBLAS
// Haswell kernels", followed, where they are not AVX-512 ones on a CPU with AVX-512, by ": narrower than
// this CPU's AVX-512" and the setting that would use it.
std::string blas_kernels();
// Whether OpenBLAS's kernels are narrower than the CPU's AVX-512 (F, CD, BW, DQ, VL).
bool blas_kernels_leave_avx512_unused();
// The rule, for an OpenBLAS core name (any case): every core but SkylakeX, Cooperlake and SapphireRapids,
// on a CPU with AVX-512.
bool leaves_avx512_unused(const std::string& core, bool cpu_has_avx512);

}  // namespace rnn_dist::cpu

// Which OpenBLAS kernels the CPU backend's products run on, whether they leave the CPU's AVX-512
// unused, and OpenBLAS's work buffers made resident before the first step.
#pragma once

#include <string>

namespace rnn_dist::cpu {

class Team;

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

// OpenBLAS (0.3.21) packs into one of a table of work buffers per call, the first one free; each is
// mapped when first used and its pages become resident only where a call writes. In a buffer no larger
// call has used, the weight gradients' and the head's products ran at 8-10 GFLOP/s instead of 25-36 on
// a Zen 1, and `rnn_dist train` at about half its speed (0.54x on 1 thread, 0.47x on 2); reading the
// buffer's pages once restores the rate, so the slow accesses never fault a page in: prefetches, by
// inference (issue 29, docs/benchmarks.md). prime_blas_buffers makes as many buffers resident as the
// team has members: each member multiplies 64 x 1024 x 1024 (after which every shape of
// bench/blas_buffers.sh runs at the full rate), all of them at once so that each takes a buffer of its
// own, until one member has seen all of them inside a call together (at most 8 calls each). Once per
// process for any team size up to the largest primed; returns how many buffers are primed in all.
int prime_blas_buffers(Team& team);

}  // namespace rnn_dist::cpu

// bfloat16 on the host: the type gradients travel as under --allreduce-dtype bf16, and its conversions.
#pragma once

#include <cstdint>
#include <cstring>

namespace rnn_dist {

// A bfloat16 value as its 16-bit pattern: the upper half of a float (8 exponent bits, 7 of mantissa).
struct Bf16 {
  uint16_t bits;
};

// Rounded to nearest, ties to even, as CUDA's __float2bfloat16_rn; a NaN stays a (quiet) NaN.
inline Bf16 to_bf16(float x) {
  uint32_t u;
  std::memcpy(&u, &x, sizeof(u));
  if ((u & 0x7fffffffu) > 0x7f800000u) return {static_cast<uint16_t>((u >> 16) | 0x40u)};
  u += 0x7fffu + ((u >> 16) & 1u);
  return {static_cast<uint16_t>(u >> 16)};
}

inline float from_bf16(Bf16 b) {
  const uint32_t u = uint32_t{b.bits} << 16;
  float x;
  std::memcpy(&x, &u, sizeof(x));
  return x;
}

// One hop of the bfloat16 all-reduce: inout[i] = in[i] + inout[i], added in fp32 and rounded to bfloat16
// (the MPI user-defined operation of --allreduce-dtype bf16 is this loop). The fp32 sum of two bfloat16
// values rounds them at most once more where the result cannot be a bfloat16 tie, so each hop is the
// nearest bfloat16 to the exact sum.
inline void bf16_accumulate(const Bf16* in, Bf16* inout, int64_t n) {
  for (int64_t i = 0; i < n; ++i) inout[i] = to_bf16(from_bf16(in[i]) + from_bf16(inout[i]));
}

}  // namespace rnn_dist

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

}  // namespace rnn_dist

// bfloat16 conversions (util/bfloat16.h) against a reference that picks the nearer of the two bfloat16
// neighbours of x in double precision, ties to the even one; NaN, infinities and overflow.
#include "rnn_dist/util/bfloat16.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <random>

namespace rnn_dist {
namespace {

uint32_t bits_of(float x) {
  uint32_t u;
  std::memcpy(&u, &x, sizeof(u));
  return u;
}
float float_of(uint32_t u) {
  float x;
  std::memcpy(&x, &u, sizeof(x));
  return x;
}
// The value of the bfloat16 pattern b (upper 16 bits of a float) as a double; the pattern past the
// largest finite one stands for 2^128, where rounding to nearest overflows to infinity.
double value_of(uint32_t b, bool negative) {
  const uint32_t u = b << 16;
  const double v = (u & 0x7fffffffu) == 0x7f800000u ? std::ldexp(1.0, 128) : std::fabs(double(float_of(u)));
  return negative ? -v : v;
}

uint16_t reference(float x) {
  const uint32_t u = bits_of(x);
  const bool negative = u >> 31;
  const uint32_t down = u >> 16, up = down + 1;  // towards zero, and away from it
  const double dd = std::fabs(double(x) - value_of(down, negative)), du = std::fabs(double(x) - value_of(up, negative));
  if (dd < du) return static_cast<uint16_t>(down);
  if (du < dd) return static_cast<uint16_t>(up);
  return static_cast<uint16_t>((down & 1) ? up : down);
}

TEST(Bfloat16, RoundsToNearestTiesToEven) {
  std::mt19937 gen(11);
  int ties = 0;
  for (int i = 0; i < 2000000; ++i) {
    uint32_t u = gen();
    if (i % 4 == 0) u = (u & 0xffff0000u) | 0x8000u;  // exactly halfway between two bfloat16 values
    const float x = float_of(u);
    if (std::isnan(x)) continue;
    ties += (u & 0xffffu) == 0x8000u;
    ASSERT_EQ(to_bf16(x).bits, reference(x)) << "x = " << x << " (bits " << std::hex << u << ")";
  }
  EXPECT_GT(ties, 400000);
}

TEST(Bfloat16, ExactValuesRoundTrip) {
  for (float x : {0.0f, -0.0f, 1.0f, -2.5f, 256.0f, 1.0f / 128, 3.0e38f}) {
    const float y = from_bf16(to_bf16(x));
    if (bits_of(x) & 0xffffu) continue;  // 3e38 is not a bfloat16 value: checked by the reference above
    EXPECT_EQ(bits_of(y), bits_of(x)) << x;
  }
  EXPECT_EQ(from_bf16(to_bf16(257.0f)), 256.0f);  // 257 = 256 + 1 is a tie: to even (256)
  EXPECT_EQ(from_bf16(to_bf16(259.0f)), 260.0f);
}

TEST(Bfloat16, SpecialValues) {
  const float inf = std::numeric_limits<float>::infinity();
  EXPECT_EQ(from_bf16(to_bf16(inf)), inf);
  EXPECT_EQ(from_bf16(to_bf16(-inf)), -inf);
  EXPECT_EQ(from_bf16(to_bf16(std::numeric_limits<float>::max())), inf);  // overflows, as __float2bfloat16_rn
  // A NaN whose payload sits in the low bits only must not become infinity.
  EXPECT_TRUE(std::isnan(from_bf16(to_bf16(float_of(0x7f800001u)))));
  EXPECT_TRUE(std::isnan(from_bf16(to_bf16(std::numeric_limits<float>::quiet_NaN()))));
}

}  // namespace
}  // namespace rnn_dist

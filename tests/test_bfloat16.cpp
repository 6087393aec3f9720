// bfloat16 conversions (util/bfloat16.h) against a reference that picks the nearer of the two bfloat16
// neighbours of x in double precision, ties to the even one; NaN, infinities and overflow; and the
// all-reduce's hop (bf16_accumulate, the MPI operation's loop) against the nearest bfloat16 to the exact
// sum, hop by hop.
#include "rnn_dist/util/bfloat16.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

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

// The nearest bfloat16 pattern to a double (the exact sum of two bfloat16 values), ties to even; past the
// largest finite value, infinity.
uint16_t nearest(double s) {
  if (s == 0) return 0;
  const bool negative = s < 0;
  const uint32_t p = (bits_of(static_cast<float>(std::fabs(s))) >> 16) & 0x7fffu;
  uint32_t best = p;
  double best_d = std::numeric_limits<double>::infinity();
  for (uint32_t c = p > 0 ? p - 1 : 0; c <= std::min<uint32_t>(p + 2, 0x7f80u); ++c) {
    const double d = std::fabs(std::fabs(s) - value_of(c, false));
    if (d < best_d || (d == best_d && !(c & 1))) best = c, best_d = d;
  }
  return static_cast<uint16_t>(best | (negative ? 0x8000u : 0u));
}

// Issue 27 #8: the MPI bfloat16 sum itself. Each hop is the nearest bfloat16 to the exact sum of its two
// operands (1M random finite pairs, equal exponents and far apart, opposite signs, overflow); three ranks
// round twice, at each hop, which is not always the rounding of the exact three-way sum.
TEST(Bfloat16, AllreduceHopIsTheNearestToTheExactSum) {
  std::mt19937 gen(12);
  auto finite = [&] {
    for (;;) {
      const uint16_t b = static_cast<uint16_t>(gen());
      if ((b & 0x7f80u) != 0x7f80u) return Bf16{b};
    }
  };
  std::vector<Bf16> in(1 << 20), inout(1 << 20), before;
  for (size_t i = 0; i < in.size(); ++i) in[i] = finite(), inout[i] = i % 4 ? finite() : Bf16{uint16_t(in[i].bits ^ 0x8000u)};
  before = inout;
  bf16_accumulate(in.data(), inout.data(), static_cast<int64_t>(in.size()));
  for (size_t i = 0; i < in.size(); ++i) {
    const double exact = double(from_bf16(in[i])) + double(from_bf16(before[i]));
    ASSERT_EQ(inout[i].bits, nearest(exact)) << std::hex << in[i].bits << " + " << before[i].bits;
  }
  const Bf16 big{0x7f7f};  // the largest finite bfloat16
  Bf16 sum = big;
  bf16_accumulate(&big, &sum, 1);
  EXPECT_TRUE(std::isinf(from_bf16(sum)));
  int differ = 0;
  for (int i = 0; i < 100000; ++i) {
    const Bf16 a = finite(), b = finite(), c = finite();
    Bf16 hop = c;
    bf16_accumulate(&b, &hop, 1);  // rank 1's value into rank 2's
    bf16_accumulate(&a, &hop, 1);  // then rank 0's
    const Bf16 first{nearest(double(from_bf16(b)) + double(from_bf16(c)))};
    ASSERT_EQ(hop.bits, nearest(double(from_bf16(a)) + double(from_bf16(first))));
    const double three = double(from_bf16(a)) + double(from_bf16(b)) + double(from_bf16(c));
    differ += std::isfinite(three) && hop.bits != nearest(three);
  }
  EXPECT_GT(differ, 0) << "rounding at each hop never differed from rounding the exact sum";
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

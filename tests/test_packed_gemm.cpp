// Tests of the packed small-M product (packed_gemm.h): every variant this CPU runs against a double-precision loop,
// over shapes that leave every tail (rows past the register block, a partial last panel, panels left after the
// register block's, a partial last K block, k = 1), in both packings, accumulating and not, with leading dimensions
// wider than the matrices (whose extra columns must stay untouched); the weight-gradient product A^T B the same way,
// over K blocks and column tiles with tails; several B's in one call against one call each; the K blocks of 128
// and of 512 to the bit.
#include "rnn_dist/cpu/packed_gemm.h"

#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "rnn_dist/util/error.h"

namespace rnn_dist::cpu {
namespace {

std::vector<float> random_floats(size_t n, std::mt19937& rng) {
  std::uniform_real_distribution<float> dist(-1, 1);
  std::vector<float> v(n);
  for (float& e : v) e = dist(rng);
  return v;
}

// How c (m rows of ldc) agrees with c0 (added where accumulate) plus product(i, j) in double, relative
// to 1 + |want|; and whether the columns past n kept c0's values.
struct Agreement {
  double worst = 0;
  bool outside_untouched = true;
};
template <class Product>
Agreement agreement(const std::vector<float>& c, const std::vector<float>& c0, int m, int n, int ldc, bool accumulate,
                    Product&& product) {
  Agreement r;
  for (int i = 0; i < m; ++i)
    for (int j = 0; j < ldc; ++j) {
      const size_t e = size_t(i) * ldc + j;
      if (j >= n) {
        r.outside_untouched &= c[e] == c0[e];
        continue;
      }
      const double want = (accumulate ? c0[e] : 0.0) + product(i, j);
      r.worst = std::max(r.worst, std::abs(c[e] - want) / (1 + std::abs(want)));
    }
  return r;
}

TEST(PackedGemm, EveryVariantMatchesADoubleLoopOnEveryTail) {
  std::mt19937 rng(29);
  std::printf("variants on this CPU:");
  for (int v = 0; v < packed_gemm_variants(); ++v) std::printf(" %s", packed_gemm_variant_name(v));
  std::printf("\n");
  const int shapes[][3] = {{32, 1024, 256}, {1, 16, 1}, {7, 5, 3}, {13, 48, 17}, {9, 40, 64}, {33, 200, 31}, {8, 32, 8}, {2, 17, 100},
                           {14, 101, 300}, {6, 128, 129},  // K blocks with a partial last; 6-row and 2-panel tails
                           {450, 40, 20},  // row blocks of a tall product (two whole and a partial one)
                           // C wider than 64 k floats a row block, so column blocks over every K block:
                           // a partial panel and K block, and rows of 1100 floats (176 to a row block)
                           {200, 409, 300}, {200, 350, 1100}};
  for (int v = 0; v < packed_gemm_variants(); ++v)
    for (const auto& [m, n, k] : shapes)
      for (bool transposed : {false, true})
        for (bool accumulate : {false, true}) {
          const int lda = k + 3, ldc = n + 5, ldw = transposed ? k + 2 : n + 2;
          const auto a = random_floats(size_t(m) * lda, rng);
          // transposed: W is n x k (B = W^T, as the forward pass's x W^T); else W is k x n (B = W).
          const auto w = random_floats(size_t(transposed ? n : k) * ldw, rng);
          const auto c0 = random_floats(size_t(m) * ldc, rng);
          std::vector<float> packed(packed_elems(k, n), 7.0f), c = c0;
          if (transposed)
            pack_b(w.data(), 1, ldw, k, n, packed.data());
          else
            pack_b(w.data(), ldw, 1, k, n, packed.data());
          packed_gemm(m, n, k, a.data(), lda, packed.data(), accumulate, c.data(), ldc, v);
          const auto [worst, outside_untouched] = agreement(c, c0, m, n, ldc, accumulate, [&](int i, int j) {
            double sum = 0;
            for (int q = 0; q < k; ++q)
              sum += double(a[size_t(i) * lda + q]) * (transposed ? w[size_t(j) * ldw + q] : w[size_t(q) * ldw + j]);
            return sum;
          });
          EXPECT_LT(worst, 2e-6 * std::sqrt(double(k))) << packed_gemm_variant_name(v) << " m=" << m << " n=" << n
                                                         << " k=" << k << " transposed=" << transposed
                                                         << " accumulate=" << accumulate;
          EXPECT_TRUE(outside_untouched) << packed_gemm_variant_name(v) << " wrote past column " << n;
        }
}

// C += A^T B (A: k x m, B: k x n), A^T read in place, on K blocks: every variant, shapes with a partial K
// block, a partial panel, rows past one block of rows (192) and in every remainder group (411: 2 x 192 +
// 27), leading dimensions wider than the matrices; the blocks as tall as the scratch allows (256 at most).
TEST(PackedGemm, TransposedProductMatchesADoubleLoop) {
  std::mt19937 rng(30);
  const int shapes[][3] = {{1, 1, 1}, {32, 16, 256}, {70, 37, 600}, {5, 64, 257}, {100, 3, 40}, {411, 50, 300}};
  for (int v = 0; v < packed_gemm_variants(); ++v)
    for (const auto& [m, n, k] : shapes) {
      const int lda = m + 3, ldb = n + 2, ldc = n + 5;
      const auto a = random_floats(size_t(k) * lda, rng), b = random_floats(size_t(k) * ldb, rng);
      const auto c0 = random_floats(size_t(m) * ldc, rng);
      // Room for K blocks of 40 rows: several blocks and a partial one where k > 40.
      std::vector<float> c = c0, scratch(40 * packed_elems(1, n), 7.0f);
      ASSERT_EQ(packed_gemm_tn_rows({n}, scratch.size()), 40);
      packed_gemm_tn(m, n, k, a.data(), lda, b.data(), ldb, c.data(), ldc, scratch.data(), scratch.size(), v);
      const auto [worst, outside_untouched] = agreement(c, c0, m, n, ldc, true, [&](int i, int j) {
        double sum = 0;
        for (int q = 0; q < k; ++q) sum += double(a[size_t(q) * lda + i]) * b[size_t(q) * ldb + j];
        return sum;
      });
      EXPECT_LT(worst, 2e-6 * std::sqrt(double(k))) << packed_gemm_variant_name(v) << " m=" << m << " n=" << n
                                                    << " k=" << k;
      EXPECT_TRUE(outside_untouched) << packed_gemm_variant_name(v) << " m=" << m << " n=" << n << " k=" << k;
    }
  const int tallest = packed_gemm_tn_tallest_rows();
  EXPECT_EQ(tallest, packed_gemm_long_k_blocks() ? 512 : 256);
  EXPECT_EQ(packed_gemm_tn_rows({64}, size_t{1} << 20), tallest);
  EXPECT_EQ(packed_gemm_tn_rows({64}, packed_gemm_tn_scratch_elems({64})), tallest);
  EXPECT_EQ(packed_gemm_tn_rows({64}, 64 - 1), 0);
  // Widths round up to whole panels each: 8 and 8 columns take two.
  EXPECT_EQ(packed_gemm_tn_rows({8, 8}, 40 * 32), 40);
  EXPECT_EQ(packed_gemm_tn_rows({8, 8}, 40 * 32 - 1), 39);
}

// Products of one A in one pass (a layer's dW_ih and dW_hh from its dG) give, to the bit, one call per
// product: every variant, widths apart and in partial panels, K in several blocks and a partial one, rows
// past one row block; the C's columns past n untouched. A scratch that holds no K block of them all is
// refused.
TEST(PackedGemm, TransposedProductsInOnePassAreOneCallEach) {
  std::mt19937 rng(32);
  const int shapes[][4] = {{32, 64, 256, 600}, {411, 37, 5, 300}, {7, 16, 1, 41}};
  for (int v = 0; v < packed_gemm_variants(); ++v)
    for (const auto& [m, n1, n2, k] : shapes) {
      const int lda = m + 3, ldb1 = n1 + 1, ldb2 = n2 + 4, ldc1 = n1 + 2, ldc2 = n2 + 3;
      const auto a = random_floats(size_t(k) * lda, rng), b1 = random_floats(size_t(k) * ldb1, rng),
                 b2 = random_floats(size_t(k) * ldb2, rng);
      const auto c1 = random_floats(size_t(m) * ldc1, rng), c2 = random_floats(size_t(m) * ldc2, rng);
      std::vector<float> one1 = c1, one2 = c2, each1 = c1, each2 = c2;
      std::vector<float> scratch(40 * (packed_elems(1, n1) + packed_elems(1, n2)), 7.0f);
      ASSERT_EQ(packed_gemm_tn_rows({n1, n2}, scratch.size()), 40);
      const TnProduct products[] = {{b1.data(), ldb1, n1, one1.data(), ldc1}, {b2.data(), ldb2, n2, one2.data(), ldc2}};
      packed_gemm_tn(m, k, a.data(), lda, products, scratch.data(), scratch.size(), v);
      packed_gemm_tn(m, n1, k, a.data(), lda, b1.data(), ldb1, each1.data(), ldc1, scratch.data(), scratch.size(), v);
      packed_gemm_tn(m, n2, k, a.data(), lda, b2.data(), ldb2, each2.data(), ldc2, scratch.data(), scratch.size(), v);
      const std::string shape = std::string(packed_gemm_variant_name(v)) + " m=" + std::to_string(m) +
                                " n=" + std::to_string(n1) + "+" + std::to_string(n2) + " k=" + std::to_string(k);
      EXPECT_EQ(one1, each1) << shape;
      EXPECT_EQ(one2, each2) << shape;
      EXPECT_NE(one1, c1) << shape << ": nothing written";
      const auto [worst, outside_untouched] = agreement(one2, c2, m, n2, ldc2, true, [&](int i, int j) {
        double sum = 0;
        for (int q = 0; q < k; ++q) sum += double(a[size_t(q) * lda + i]) * b2[size_t(q) * ldb2 + j];
        return sum;
      });
      EXPECT_LT(worst, 2e-6 * std::sqrt(double(k))) << shape;
      EXPECT_TRUE(outside_untouched) << shape;
    }
  std::vector<float> a(4), b(4), c(4), scratch(16);
  const TnProduct two[] = {{b.data(), 1, 1, c.data(), 1}, {b.data(), 1, 1, c.data(), 1}};
  EXPECT_THROW(packed_gemm_tn(1, 1, a.data(), 1, two, scratch.data(), scratch.size()), Error);
}

// Several B's in one call (the LSTM's four gate blocks, A's rows packed once for all of them) give, to the
// bit, one call per B: every variant, accumulating and not, on shapes with row blocks, K blocks and a
// partial panel; B's apart by more than their size and C's blocks interleaved in its columns, as the time
// loop has them; the columns between the blocks untouched.
TEST(PackedGemm, BlocksInOneCallAreOneCallPerBlock) {
  std::mt19937 rng(31);
  // {200, 100, 300}: four blocks' C is wide enough for column blocks over every K block, one block's not.
  const int shapes[][3] = {{32, 64, 256}, {7, 20, 3}, {200, 37, 300}, {1, 16, 129}, {200, 100, 300}};
  for (int v = 0; v < packed_gemm_variants(); ++v)
    for (const auto& [m, n, k] : shapes)
      for (bool accumulate : {false, true}) {
        const int blocks = 4, lda = k + 1;
        const int64_t stride = int64_t(packed_elems(k, n)) + 48, c_stride = n + 3;
        const int ldc = int(blocks * c_stride) + 2;
        const auto a = random_floats(size_t(m) * lda, rng), w = random_floats(size_t(blocks) * k * n, rng);
        std::vector<float> packed(size_t(blocks * stride), 7.0f);
        for (int q = 0; q < blocks; ++q) pack_b(w.data() + size_t(q) * k * n, n, 1, k, n, packed.data() + q * stride);
        const auto c0 = random_floats(size_t(m) * ldc, rng);
        std::vector<float> one = c0, each = c0;
        packed_gemm_blocks(m, n, k, a.data(), lda, blocks, packed.data(), stride, accumulate, one.data(), ldc, c_stride,
                           v);
        for (int q = 0; q < blocks; ++q)
          packed_gemm(m, n, k, a.data(), lda, packed.data() + q * stride, accumulate, each.data() + q * c_stride, ldc,
                      v);
        EXPECT_EQ(one, each) << packed_gemm_variant_name(v) << " m=" << m << " n=" << n << " k=" << k
                             << " accumulate=" << accumulate;
        EXPECT_NE(one, c0) << "nothing written";
      }
}

TEST(PackedGemm, PackingZeroesThePartialPanel) {
  std::mt19937 rng(1);
  const int k = 3, n = 20;
  const auto w = random_floats(size_t(k) * n, rng);
  std::vector<float> packed(packed_elems(k, n), 7.0f);
  ASSERT_EQ(packed.size(), size_t(k) * 32);
  pack_b(w.data(), n, 1, k, n, packed.data());
  for (int i = 0; i < k; ++i)
    for (int q = 0; q < 16; ++q) {
      EXPECT_EQ(packed[size_t(16) * i + q], w[size_t(i) * n + q]);
      EXPECT_EQ(packed[size_t(16) * k + 16 * i + q], q < 4 ? w[size_t(i) * n + 16 + q] : 0.0f);
    }
}

// A team packs one B in parts: any number of parts (more than its panels too) gives pack_b's buffer.
TEST(PackedGemm, PackingInPartsIsPackingWhole) {
  std::mt19937 rng(2);
  const int k = 5, n = 70;  // 5 panels, the last partial
  const auto w = random_floats(size_t(n) * k, rng);
  std::vector<float> whole(packed_elems(k, n), 7.0f);
  pack_b(w.data(), 1, k, k, n, whole.data());
  for (int parts : {1, 2, 3, 7}) {
    std::vector<float> packed(packed_elems(k, n), 7.0f);
    for (int part = 0; part < parts; ++part) pack_b_part(w.data(), 1, k, k, n, packed.data(), part, parts);
    EXPECT_EQ(packed, whole) << parts << " parts";
  }
}

TEST(PackedGemm, AVariantThisCpuCannotRunIsRefused) {
  EXPECT_THROW(packed_gemm_variant_name(packed_gemm_variants()), Error);
  EXPECT_THROW(packed_gemm_variant_name(-1), Error);
  EXPECT_GE(packed_gemm_best_variant(), 0);
  EXPECT_LT(packed_gemm_best_variant(), packed_gemm_variants());
}

// The K block is a choice by CPU, so it must change no bit (a run resumed on another host goes on to the
// bit): AVX-512's products in K blocks of 128 and of 512 agree exactly, with K in one partial block and in
// several with a partial last, in both orders of a product (C narrow and wide), accumulating and not,
// four B's in one call; so do the weight-gradient products, whose K blocks (packed_gemm_tn_tallest_rows)
// run in either.
TEST(PackedGemm, TheKBlockChangesNoBit) {
  int k128 = -1, k512 = -1;
  for (int v = 0; v < packed_gemm_variants(); ++v) {
    const std::string name = packed_gemm_variant_name(v);
    if (name == "AVX-512") k128 = v;
    if (name == "AVX-512, K blocks of 512") k512 = v;
  }
  if (k128 < 0 || k512 < 0) GTEST_SKIP() << "this CPU runs no AVX-512, whose variants alone differ in K blocks";
  std::mt19937 rng(33);
  const int shapes[][3] = {{32, 256, 256}, {64, 1024, 1100}, {33, 200, 700}, {200, 350, 1100}, {450, 40, 600}};
  for (const auto& [m, n, k] : shapes)
    for (bool accumulate : {false, true}) {
      const int blocks = 4, lda = k + 1, ldc = blocks * n + 2;
      const int64_t stride = int64_t(packed_elems(k, n));
      const auto a = random_floats(size_t(m) * lda, rng), w = random_floats(size_t(blocks) * k * n, rng);
      std::vector<float> packed(size_t(blocks * stride));
      for (int q = 0; q < blocks; ++q) pack_b(w.data() + size_t(q) * k * n, n, 1, k, n, packed.data() + q * stride);
      const auto c0 = random_floats(size_t(m) * ldc, rng);
      std::vector<float> in128 = c0, in512 = c0;
      packed_gemm_blocks(m, n, k, a.data(), lda, blocks, packed.data(), stride, accumulate, in128.data(), ldc, n, k128);
      packed_gemm_blocks(m, n, k, a.data(), lda, blocks, packed.data(), stride, accumulate, in512.data(), ldc, n, k512);
      EXPECT_EQ(in128, in512) << "m=" << m << " n=" << n << " k=" << k << " accumulate=" << accumulate;
      EXPECT_NE(in128, c0) << "nothing written";
      std::vector<float> tn128(size_t(k) * n), tn512(tn128), scratch(packed_gemm_tn_scratch_elems({n}));
      packed_gemm_tn(k, n, m, a.data(), lda, w.data(), n, tn128.data(), n, scratch.data(), scratch.size(), k128);
      packed_gemm_tn(k, n, m, a.data(), lda, w.data(), n, tn512.data(), n, scratch.data(), scratch.size(), k512);
      EXPECT_EQ(tn128, tn512) << "A^T B, m=" << k << " n=" << n << " k=" << m;
    }
}

}  // namespace
}  // namespace rnn_dist::cpu

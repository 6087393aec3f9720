// Small-M float products against packed weights (see packed_gemm.h).
#include "rnn_dist/cpu/packed_gemm.h"

#include <algorithm>
#include <cstring>
#include <initializer_list>

// The x86 variants need GCC's target attributes; cpuid gives the CPU family for the K block (takes_k512).
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#define RNN_DIST_PACKED_X86 1
#include <cpuid.h>
#endif

#include "rnn_dist/util/error.h"

namespace rnn_dist::cpu {

namespace {

constexpr int kPanel = 16;  // columns per panel: one AVX-512 register of floats
constexpr int kMaxTargets = 4;  // products of one call to a variant

// One product of a call: C (n columns, ldc) from A's rows and a B packed over the call's k.
struct Target {
  const float* packed;
  int n;
  float* c;
  int ldc;
};

#if defined(__clang__)
#pragma clang diagnostic ignored "-Wpsabi"
#elif defined(__GNUC__)
#pragma GCC diagnostic ignored "-Wpsabi"
#endif
// The vector registers of each variant: a panel of 16 columns is one of AVX-512's, two of AVX2's, four
// of the baseline's. Each variant computes in its own width: with AVX-512's type under AVX2, GCC moved
// every vector through the integer registers and the stack, and the AVX2 kernel ran at a sixth of the
// core's rate (a Zen 1 host, docs/benchmarks.md, session 19). Only always-inlined code below uses the
// types, so no call passes one.
using F4 = float __attribute__((vector_size(16)));
using F8 = float __attribute__((vector_size(32)));
using F16 = float __attribute__((vector_size(64)));
template <class V>
constexpr int kLanes = sizeof(V) / sizeof(float);

#define RNN_DIST_INLINE [[gnu::always_inline]] inline
#define RNN_DIST_LAMBDA_INLINE __attribute__((always_inline))
#if defined(__GNUC__) && !defined(__clang__)
#define RNN_DIST_UNROLL _Pragma("GCC unroll 16")
#else
#define RNN_DIST_UNROLL _Pragma("unroll")
#endif

template <class V>
RNN_DIST_INLINE V load(const float* p) {
  V v;
  std::memcpy(&v, p, sizeof(v));
  return v;
}
template <class V>
RNN_DIST_INLINE void store(float* p, const V& v) {
  std::memcpy(p, &v, sizeof(v));
}

// C's MR rows x NP panels (16 NP columns, all of them inside C) += or = A's MR rows times the NP panels
// starting at `panels` (consecutive panels `panel` floats apart), over k. A's rows come packed (pack_block:
// the MR values of each k together). The accumulators stay in registers across k. With kAhead, the loop
// also touches the block at `ahead` (the same shape) that the product reads next, so that it comes from
// L2, not L3, when its turn comes.
template <class V, int MR, int NP, bool kAhead = false>
RNN_DIST_INLINE void tile(int k, const float* a, const float* panels, int64_t panel, const float* ahead,
                          bool accumulate, float* c, int ldc) {
  constexpr int L = kLanes<V>, W = kPanel / L;  // W vectors per panel
  V acc[MR][NP * W];
  RNN_DIST_UNROLL for (int r = 0; r < MR; ++r)
    RNN_DIST_UNROLL for (int v = 0; v < NP * W; ++v)
      acc[r][v] = accumulate ? load<V>(c + int64_t{r} * ldc + L * v) : V{};
  for (int i = 0; i < k; ++i) {
    V b[NP * W];
    RNN_DIST_UNROLL for (int p = 0; p < NP; ++p) {
      RNN_DIST_UNROLL for (int w = 0; w < W; ++w)
        b[p * W + w] = load<V>(panels + p * panel + int64_t{kPanel} * i + L * w);
      if constexpr (kAhead) __builtin_prefetch(ahead + p * panel + int64_t{kPanel} * i, 0, 2);
    }
    RNN_DIST_UNROLL for (int r = 0; r < MR; ++r) {
      const float x = a[int64_t{i} * MR + r];
      RNN_DIST_UNROLL for (int v = 0; v < NP * W; ++v) acc[r][v] += x * b[v];
    }
  }
  RNN_DIST_UNROLL for (int r = 0; r < MR; ++r)
    RNN_DIST_UNROLL for (int v = 0; v < NP * W; ++v) store<V>(c + int64_t{r} * ldc + L * v, acc[r][v]);
}

// Calls f.template operator()<H>(r) for each group of H rows from r to m: MR rows at a time, the remainder
// 6 (below 8: 6 and 7 rows were 40% slower as 4 + 2 + 1), 4, 2 and 1 at a time. A block's rows are packed
// (pack_block) and multiplied (column_block) in these groups, the group of row r at packed + r k.
template <int MR, class F>
RNN_DIST_INLINE void row_groups(int m, int r, F&& f) {
  for (; r + MR <= m; r += MR) f.template operator()<MR>(r);
  if constexpr (MR > 6)
    if (r + 6 <= m) f.template operator()<6>(r), r += 6;
  if constexpr (MR > 4)
    if (r + 4 <= m) f.template operator()<4>(r), r += 4;
  if constexpr (MR > 2)
    if (r + 2 <= m) f.template operator()<2>(r), r += 2;
  for (; r < m; ++r) f.template operator()<1>(r);
}

// Rows [0, m) of one column block of NP panels, in row_groups (A packed by pack_block); the first MR rows
// touch `ahead` where it is not null.
template <class V, int MR, int NP>
RNN_DIST_INLINE void column_block(int m, int k, const float* a, const float* panels, int64_t panel,
                                  const float* ahead, bool accumulate, float* c, int ldc) {
  int r = 0;
  if (ahead != nullptr && m >= MR) {
    tile<V, MR, NP, true>(k, a, panels, panel, ahead, accumulate, c, ldc);
    r = MR;
  }
  row_groups<MR>(m, r, [&]<int H>(int row) RNN_DIST_LAMBDA_INLINE {
    tile<V, H, NP>(k, a + int64_t{row} * k, panels, panel, nullptr, accumulate, c + int64_t{row} * ldc, ldc);
  });
}

// Rows [0, m) of A over k, packed in row_groups, each group as a tile reads it: the H values of each k
// together. A is row-major (lda apart), or with a_transposed given as A^T (k x m, lda apart), whose H
// values of a k are then already contiguous: the weight gradients' dG^T is read in place.
template <int MR>
RNN_DIST_INLINE void pack_block(int m, int k, const float* a, int lda, bool a_transposed, float* packed) {
  row_groups<MR>(m, 0, [&]<int H>(int row) RNN_DIST_LAMBDA_INLINE {
    float* to = packed + int64_t{row} * k;
    if (a_transposed) {
      for (int i = 0; i < k; ++i)
        RNN_DIST_UNROLL for (int q = 0; q < H; ++q) to[int64_t{i} * H + q] = a[int64_t{i} * lda + row + q];
      return;
    }
    const float* rows = a + int64_t{row} * lda;
    for (int i = 0; i < k; ++i)
      RNN_DIST_UNROLL for (int q = 0; q < H; ++q) to[int64_t{i} * H + q] = rows[int64_t{q} * lda + i];
  });
}

// Rows per block of a tall product: a block's rows of A stay in L2 while every column block passes over
// them, where each column block would otherwise stream the whole of A from L3 again.
constexpr int kMc = 192;
// K per block (KC below, a choice by CPU: kVariants): on Intel's cores a column block's slice of the
// panels (128 x 48 floats: 24 kB) stays in L1 while every row tile of the block passes over it (64, 192
// and 256 slower, docs/benchmarks.md, session 16). Zen 4 runs an AVX-512 FMA as two halves, at half the
// rate per cycle, and its L2 keeps up with that: blocks of 512 (a slice of 96 kB in L2) pass C's partial
// sums through the registers a quarter as often, 1.05-1.08x the kernel's rate (session 25). The partial
// sums go through C in the same order of k whatever the block, so the results are the same to the bit.
constexpr int kKc = 128;
constexpr int kLongKc = 512;
// The largest C of a block of rows (its rows by every target's columns) that goes K block by K block
// over every target, one K block of A staying in L1 for all of them: 64 k floats, which stay in L2.
// Wider, C goes through L3 between the K blocks (L's recurrent product: 64 x 4096 for one 16 MB W_hh,
// and its input projections' 192 x 4096), and each column block passes over every K block instead, its
// rows of C staying in L1: product_by_columns.
constexpr int64_t kKOutsideElems = 64 * 1024;
// product_by_columns packs a block of rows over the whole of K: up to kMc rows, fewer where K is longer
// than kColumnBlockElems / kMc.
constexpr int kColumnBlockElems = kMc * 1024;

// One column block of NP panels, rows [0, m) of C, over every K block of k: A's rows packed by K block,
// the one at k0 at a + a_rows k0, these rows from row r0 of it. The partial sums go through C in the
// order of k; each K block's slice touches the next, the last one `next`.
template <class V, int MR, int NP, int KC>
RNN_DIST_INLINE void column_block_k(int m, int k, const float* a, int a_rows, int r0, const float* panels,
                                    int64_t panel, const float* next, bool accumulate, float* c, int ldc) {
  for (int k0 = 0; k0 < k; k0 += KC) {
    const int ks = std::min(KC, k - k0);
    const float* ahead = k0 + KC < k ? panels + int64_t{kPanel} * (k0 + KC) : next;
    column_block<V, MR, NP>(m, ks, a + int64_t{a_rows} * k0 + int64_t{r0} * ks, panels + int64_t{kPanel} * k0,
                            panel, ahead, accumulate || k0 > 0, c, ldc);
  }
}

// Rows [0, m) over k (a K block of product_by_k_blocks, or all of product_by_columns' K blocks; the
// panels from `packed`, `panel` floats apart): column blocks of NP panels while they last (each touching
// the next, the last `next`), then two and single panels; the last panel, when n does not fill it, goes
// through a 16-wide copy of its columns of C, MR rows at a time.
template <class V, int MR, int NP, int KC>
RNN_DIST_INLINE void product_rows(int m, int n, int k, const float* a, const float* packed, int64_t panel,
                                  const float* next, bool accumulate, float* c, int ldc) {
  int j = 0;
  for (; j + NP * kPanel <= n; j += NP * kPanel) {
    const float* panels = packed + (j / kPanel) * panel;
    const float* ahead = j + 2 * NP * kPanel <= n ? panels + NP * panel : next;
    column_block_k<V, MR, NP, KC>(m, k, a, m, 0, panels, panel, ahead, accumulate, c + j, ldc);
  }
  if constexpr (NP > 2)
    for (; j + 2 * kPanel <= n; j += 2 * kPanel)
      column_block_k<V, MR, 2, KC>(m, k, a, m, 0, packed + (j / kPanel) * panel, panel, nullptr, accumulate, c + j, ldc);
  for (; j + kPanel <= n; j += kPanel)
    column_block_k<V, MR, 1, KC>(m, k, a, m, 0, packed + (j / kPanel) * panel, panel, nullptr, accumulate, c + j, ldc);
  if (j == n) return;
  const int w = n - j;
  float part[MR * kPanel];
  for (int r0 = 0; r0 < m; r0 += MR) {
    const int rows = std::min(MR, m - r0);
    for (int r = 0; r < rows; ++r) {
      float* row = part + r * kPanel;
      if (accumulate) std::memcpy(row, c + int64_t{r0 + r} * ldc + j, sizeof(float) * w);
      std::fill(row + (accumulate ? w : 0), row + kPanel, 0.0f);
    }
    column_block_k<V, MR, 1, KC>(rows, k, a, m, r0, packed + (j / kPanel) * panel, panel, nullptr, true, part, kPanel);
    for (int r = 0; r < rows; ++r) std::memcpy(c + int64_t{r0 + r} * ldc + j, part + r * kPanel, sizeof(float) * w);
  }
}

// Blocks of kMc rows by KC of K (C no wider than kKOutsideElems), each over every column of every
// target's B, A's block packed first: a tile's MR rows of A are then one stream of MR floats per k, where
// unpacked each of its MR broadcasts read a row of its own, lda floats apart (at L's K of 1024 and 4096 a
// multiple of 4 kB, which puts every row in the same L1 set): L's LSTM 1.09-1.16x faster, S's unchanged
// (docs/benchmarks.md, session 18). The packed block is on the stack: the product allocates nothing. With
// a_transposed, a holds A^T (k x m, lda apart).
template <class V, int MR, int NP, int KC>
RNN_DIST_INLINE void product_by_k_blocks(int m, int k, const float* a, int lda, bool a_transposed,
                                         const Target* targets, int count, bool accumulate) {
  const int64_t panel = int64_t{kPanel} * k;
  alignas(64) float block[kMc * KC];
  for (int m0 = 0; m0 < m; m0 += kMc)
    for (int k0 = 0; k0 < k; k0 += KC) {
      const int rows = std::min(kMc, m - m0), ks = std::min(KC, k - k0);
      pack_block<MR>(rows, ks, a_transposed ? a + int64_t{k0} * lda + m0 : a + int64_t{m0} * lda + k0, lda,
                     a_transposed, block);
      for (int q = 0; q < count; ++q) {
        const Target& t = targets[q];
        const float* next = q + 1 < count   ? targets[q + 1].packed + int64_t{kPanel} * k0
                            : k0 + KC < k ? targets[0].packed + int64_t{kPanel} * (k0 + KC)
                                           : nullptr;
        product_rows<V, MR, NP, KC>(rows, t.n, ks, block, t.packed + int64_t{kPanel} * k0, panel, next,
                                accumulate || k0 > 0, t.c + int64_t{m0} * t.ldc, t.ldc);
      }
    }
}

// Blocks of up to kMc rows (C wider than kKOutsideElems), each packed over the whole of K, then multiplied
// target by target and column block by column block over every K block: L's recurrent product 1.03-1.07x
// and its input projections 1.08-1.26x the K blocks outside, bitwise the same (an Intel host with AVX-512,
// docs/benchmarks.md, session 24). The packed block is on the stack.
template <class V, int MR, int NP, int KC>
RNN_DIST_INLINE void product_by_columns(int m, int k, const float* a, int lda, bool a_transposed,
                                        const Target* targets, int count, bool accumulate) {
  const int mc = std::min(kMc, std::max(MR, kColumnBlockElems / std::max(k, 1) / MR * MR));
  alignas(64) float block[kColumnBlockElems];
  for (int m0 = 0; m0 < m; m0 += mc) {
    const int rows = std::min(mc, m - m0);
    for (int k0 = 0; k0 < k; k0 += KC)
      pack_block<MR>(rows, std::min(KC, k - k0), a_transposed ? a + int64_t{k0} * lda + m0 : a + int64_t{m0} * lda + k0,
                     lda, a_transposed, block + int64_t{rows} * k0);
    for (int q = 0; q < count; ++q) {
      const Target& t = targets[q];
      const float* next = q + 1 < count ? targets[q + 1].packed : m0 + mc < m ? targets[0].packed : nullptr;
      product_rows<V, MR, NP, KC>(rows, t.n, k, block, t.packed, int64_t{kPanel} * k, next, accumulate,
                              t.c + int64_t{m0} * t.ldc, t.ldc);
    }
  }
}

// The product in the order its C's width calls for. (One function holding both orders ran the narrow
// products 5-11% slower than the first order alone.)
template <class V, int MR, int NP, int KC = kKc>
RNN_DIST_INLINE void product(int m, int k, const float* a, int lda, bool a_transposed, const Target* targets,
                             int count, bool accumulate) {
  int64_t width = 0;
  for (int q = 0; q < count; ++q) width += targets[q].n;
  if (std::min(m, kMc) * width <= kKOutsideElems)
    product_by_k_blocks<V, MR, NP, KC>(m, k, a, lda, a_transposed, targets, count, accumulate);
  else
    product_by_columns<V, MR, NP, KC>(m, k, a, lda, a_transposed, targets, count, accumulate);
}

using Product = void (*)(int m, int k, const float* a, int lda, bool a_transposed, const Target* targets, int count,
                         bool accumulate);

// Register blocks per instruction set: AVX-512's 32 registers hold 8 rows x 3 panels of accumulators (three
// loads of B and eight broadcasts of A per 24 FMAs; 8 x 2, 6 x 4, 12 x 2 and 4 x 4 were slower over the
// LSTM's shapes, docs/benchmarks.md, session 16); AVX2's 16 hold 6 rows x 1 panel (two registers each);
// the baseline's 16 SSE registers 2 rows x 1 panel (four each).
void product_base(int m, int k, const float* a, int lda, bool a_transposed, const Target* targets, int count,
                  bool accumulate) {
  product<F4, 2, 1>(m, k, a, lda, a_transposed, targets, count, accumulate);
}
#ifdef RNN_DIST_PACKED_X86
[[gnu::target("arch=x86-64-v3")]] void product_avx2(int m, int k, const float* a, int lda, bool a_transposed,
                                                   const Target* targets, int count, bool accumulate) {
  product<F8, 6, 1>(m, k, a, lda, a_transposed, targets, count, accumulate);
}
[[gnu::target("arch=x86-64-v4")]] void product_avx512(int m, int k, const float* a, int lda, bool a_transposed,
                                                     const Target* targets, int count, bool accumulate) {
  product<F16, 8, 3>(m, k, a, lda, a_transposed, targets, count, accumulate);
}
[[gnu::target("arch=x86-64-v4")]] void product_avx512_k512(int m, int k, const float* a, int lda, bool a_transposed,
                                                          const Target* targets, int count, bool accumulate) {
  product<F16, 8, 3, kLongKc>(m, k, a, lda, a_transposed, targets, count, accumulate);
}
#endif

struct Variant {
  const char* name;
  Product fn;
  int kc;  // its K block
  bool avx512;
};
constexpr Variant kVariants[] = {{"baseline", product_base, kKc, false},
#ifdef RNN_DIST_PACKED_X86
                                 {"AVX2", product_avx2, kKc, false},
                                 {"AVX-512", product_avx512, kKc, true},
                                 {"AVX-512, K blocks of 512", product_avx512_k512, kLongKc, true}
#endif
};

int runnable_variants() {
#ifdef RNN_DIST_PACKED_X86
  __builtin_cpu_init();
  if (__builtin_cpu_supports("x86-64-v4")) return 4;
  if (__builtin_cpu_supports("x86-64-v3")) return 2;
#endif
  return 1;
}

#ifdef RNN_DIST_PACKED_X86
// The CPU's family as cpuid gives it (base family, plus the extended family where the base is 15), on
// AMD's CPUs; 0 on any other vendor's. (GCC 12's __builtin_cpu_is knows AMD's families up to 25 only.)
int amd_family() {
  unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
  if (__get_cpuid(0, &eax, &ebx, &ecx, &edx) == 0) return 0;
  char vendor[12];
  std::memcpy(vendor, &ebx, 4), std::memcpy(vendor + 4, &edx, 4), std::memcpy(vendor + 8, &ecx, 4);
  if (std::memcmp(vendor, "AuthenticAMD", 12) != 0 || __get_cpuid(1, &eax, &ebx, &ecx, &edx) == 0) return 0;
  const int base = (eax >> 8) & 0xf;
  return base == 0xf ? base + static_cast<int>((eax >> 20) & 0xff) : base;
}
#endif

// Zen 4 and Zen 5 (AMD's families 25 and 26 with AVX-512; Zen 3, also 25, has none) take the K blocks of
// 512, every other CPU the widest instruction set's blocks of 128: measured on Zen 4, Zen 5 (its kernel
// 1.06x on S's recurrent product, 1.10x on L's, 1.02x over every shape: docs/benchmarks.md, session 28)
// and Ice Lake only (bench/packed_gemm_bench says on any host which is faster there).
bool takes_k512() {
#ifdef RNN_DIST_PACKED_X86
  __builtin_cpu_init();
  const int family = amd_family();
  return (family == 25 || family == 26) && __builtin_cpu_supports("x86-64-v4");
#else
  return false;
#endif
}

// The last variant this CPU runs in the K blocks it takes: the widest instruction set.
int best_variant() {
  static const int best = [] {
    const int kc = takes_k512() ? kLongKc : kKc;
    int v = packed_gemm_variants() - 1;
    while (kVariants[v].kc != kc) --v;
    return v;
  }();
  return best;
}

const Variant& best() { return kVariants[best_variant()]; }

// packed_gemm_tn's tallest K block: 256 rows, or the kernel's K block where that is longer (Zen 4's and Zen 5's 512),
// whose weight gradients pass C (L's: 16 MB, from L3) half as often: L's dW 1.05-1.06x and S's
// 1.01-1.04x the blocks of 256, and then 1.02-1.12x OpenBLAS's AVX-512 kernels (docs/benchmarks.md,
// session 26).
int tn_tallest() { return std::max(256, best().kc); }

// The variant's product: -1 for the best this CPU runs; any other must be one it runs.
Product product_variant(int variant) {
  if (variant < 0) return best().fn;
  packed_gemm_variant_name(variant);  // checks it
  return kVariants[variant].fn;
}

}  // namespace

size_t packed_elems(int k, int n) {
  return static_cast<size_t>(k) * static_cast<size_t>((n + kPanel - 1) / kPanel * kPanel);
}

void pack_b(const float* b, int64_t row_stride, int64_t col_stride, int k, int n, float* packed) {
  for (int j0 = 0; j0 < n; j0 += kPanel) {
    float* panel = packed + int64_t{j0} * k;
    const int w = std::min(kPanel, n - j0);
    for (int i = 0; i < k; ++i) {
      float* dst = panel + int64_t{kPanel} * i;
      const float* src = b + i * row_stride + j0 * col_stride;
      for (int q = 0; q < w; ++q) dst[q] = src[q * col_stride];
      std::fill(dst + w, dst + kPanel, 0.0f);
    }
  }
}

void pack_b_part(const float* b, int64_t row_stride, int64_t col_stride, int k, int n, float* packed, int part,
                 int parts) {
  const int64_t panels = (n + kPanel - 1) / kPanel;
  const int64_t p0 = panels * part / parts, p1 = panels * (part + 1) / parts;
  if (p1 <= p0) return;
  const int64_t c0 = p0 * kPanel, c1 = std::min<int64_t>(n, p1 * kPanel);
  pack_b(b + c0 * col_stride, row_stride, col_stride, k, static_cast<int>(c1 - c0), packed + c0 * k);
}

int packed_gemm_variants() {
  static const int n = runnable_variants();
  return n;
}

const char* packed_gemm_variant_name(int variant) {
  if (variant < 0 || variant >= packed_gemm_variants())
    throw Error(cat("packed_gemm: variant ", variant, " is not one this CPU runs (0 to ", packed_gemm_variants() - 1, ")"));
  return kVariants[variant].name;
}

void packed_gemm(int m, int n, int k, const float* a, int lda, const float* packed, bool accumulate, float* c,
                 int ldc, int variant) {
  packed_gemm_blocks(m, n, k, a, lda, 1, packed, 0, accumulate, c, ldc, 0, variant);
}

void packed_gemm_blocks(int m, int n, int k, const float* a, int lda, int blocks, const float* packed,
                        int64_t packed_stride, bool accumulate, float* c, int ldc, int64_t c_stride, int variant) {
  if (m <= 0 || n <= 0 || blocks <= 0) return;
  const Product fn = product_variant(variant);
  Target targets[kMaxTargets];
  for (int q0 = 0; q0 < blocks; q0 += kMaxTargets) {
    const int count = std::min(kMaxTargets, blocks - q0);
    for (int q = 0; q < count; ++q) targets[q] = {packed + (q0 + q) * packed_stride, n, c + (q0 + q) * c_stride, ldc};
    fn(m, k, a, lda, false, targets, count, accumulate);
  }
}

namespace {

// Floats of packed B per row of K for products `widths` columns wide.
size_t tn_row_elems(std::initializer_list<int> widths) {
  size_t elems = 0;
  for (int n : widths) elems += packed_elems(1, n);
  return elems;
}

int tn_rows(size_t row_elems, size_t elems) { return static_cast<int>(std::min<size_t>(tn_tallest(), elems / row_elems)); }

}  // namespace

size_t packed_gemm_tn_scratch_elems(std::initializer_list<int> widths) { return tn_tallest() * tn_row_elems(widths); }

int packed_gemm_tn_tallest_rows() { return tn_tallest(); }

int packed_gemm_tn_rows(std::initializer_list<int> widths, size_t elems) {
  return tn_rows(tn_row_elems(widths), elems);
}

int packed_gemm_best_variant() { return best_variant(); }

bool packed_gemm_long_k_blocks() { return best().kc == kLongKc; }

bool packed_gemm_runs_avx512() { return best().avx512; }

void packed_gemm_tn(int m, int k, const float* a, int lda, std::span<const TnProduct> products, float* scratch,
                    size_t elems, int variant) {
  if (products.size() > size_t{kMaxTargets})
    throw Error(cat("packed_gemm_tn: ", products.size(), " products in one call (at most ", kMaxTargets, ")"));
  size_t row_elems = 0;
  for (const TnProduct& p : products) row_elems += p.n > 0 ? packed_elems(1, p.n) : 0;
  if (m <= 0 || row_elems == 0) return;
  const int block = tn_rows(row_elems, elems);
  if (block == 0) throw Error(cat("packed_gemm_tn: ", elems, " floats of scratch hold no K block of ", row_elems));
  const Product fn = product_variant(variant);
  Target targets[kMaxTargets];
  for (int k0 = 0; k0 < k; k0 += block) {
    const int ks = std::min(block, k - k0);
    int count = 0;
    float* to = scratch;
    for (const TnProduct& p : products) {
      if (p.n <= 0) continue;
      pack_b(p.b + int64_t{k0} * p.ldb, p.ldb, 1, ks, p.n, to);
      targets[count++] = {to, p.n, p.c, p.ldc};
      to += packed_elems(ks, p.n);
    }
    fn(m, ks, a + int64_t{k0} * lda, lda, true, targets, count, true);
  }
}

void packed_gemm_tn(int m, int n, int k, const float* a, int lda, const float* b, int ldb, float* c, int ldc,
                    float* scratch, size_t elems, int variant) {
  const TnProduct product[] = {{b, ldb, n, c, ldc}};
  packed_gemm_tn(m, k, a, lda, product, scratch, elems, variant);
}

}  // namespace rnn_dist::cpu

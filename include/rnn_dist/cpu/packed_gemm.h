// Float matrix products against a matrix packed once: the recurrent products of the LSTM's time loop, the
// layer-wide products with its input weights, and (where OpenBLAS is slower) the weight gradients.
//
// At every time step the LSTM multiplies the batch's few rows (M = 32) by the same weights. OpenBLAS packs those
// weights again on every call, and at that size the copy and the call cost as much as the arithmetic (82 GFLOP/s on
// this host against 160 for a large sgemm, issue 29). Here the weights are packed once per pass into panels of 16
// columns, and a register-blocked kernel passes over them for every block of rows: 172 GFLOP/s on the same product
// with an 8 x 2 tile; the 8 x 3 tile over K blocks kept in L1 is 1.0-1.4x that tile (session 16's Ice Lake,
// docs/benchmarks.md). Each block of A's rows is first copied, on the stack, into the order the tile reads it (its
// MR values of each k together): L's LSTM 1.09-1.16x faster, S's unchanged (session 18). The layer-wide products
// with the input weights (x W_ih^T over every row, and dx = dG W_ih) go through it too, in blocks of rows that stay
// in L2: faster than OpenBLAS's at those shapes, most of all where the input is narrow (K or N = 64: +24% and +44%).
// The kernel is compiled for AVX-512 (in K blocks of 128, and of 512 for Zen 4 and Zen 5: sessions 26, 28),
// AVX2 and the x86-64 baseline, and the best the CPU runs is taken; the K blocks change no result.
#pragma once

#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <span>

namespace rnn_dist::cpu {

// Elements of B (k x n) packed: ceil(n / 16) panels of k x 16, the columns past n zero.
size_t packed_elems(int k, int n);

// Packs B (k x n) with B[i][j] = b[i * row_stride + j * col_stride]: row_stride 1 and col_stride ld pack
// the transpose of a row-major n x k matrix (y = x W^T), row_stride ld and col_stride 1 a row-major k x n
// one (y = x W).
void pack_b(const float* b, int64_t row_stride, int64_t col_stride, int k, int n, float* packed);

// Part `part` of `parts` of pack_b's work: its share of the panels, so that a team packs one B together
// (every part must be done before the packed B is read).
void pack_b_part(const float* b, int64_t row_stride, int64_t col_stride, int k, int n, float* packed, int part,
                 int parts);

// C (m x n, leading dimension ldc) = A (m x k, lda) times the packed B, or += it with accumulate.
// variant: -1 for the best this CPU runs, or one below packed_gemm_variants() (tests run each).
void packed_gemm(int m, int n, int k, const float* a, int lda, const float* packed, bool accumulate, float* c,
                 int ldc, int variant = -1);
// The same for `blocks` packed B's of the same shape, `packed_stride` floats apart, into C's columns at
// c + q c_stride for B number q (the four gate blocks of a member's units in the LSTM's time loop): each
// block of A's rows is packed once for all of them, not once per call; bitwise one call per B. S's LSTM
// 1.00x on 1 thread, 1.04x on 2 against four calls (Zen 1, docs/benchmarks.md, session 19).
void packed_gemm_blocks(int m, int n, int k, const float* a, int lda, int blocks, const float* packed,
                        int64_t packed_stride, bool accumulate, float* c, int ldc, int64_t c_stride,
                        int variant = -1);
// C (m x n, ldc) += A^T B, A (k x m, lda) and B (k x n, ldb) row-major: the weight gradients of a layer
// (dW = dG^T x, K = its rows), on the packed kernel. K goes in blocks of up to 256 rows (512 where the
// kernel takes K blocks of 512: packed_gemm_tn_tallest_rows): each block of B is packed into `scratch`,
// and A^T is read in place (a tile's MR values of each k are contiguous in a
// row of A; with A first transposed into scratch, S's LSTM ran 1.06-1.12x slower on 2 threads,
// docs/benchmarks.md, session 22). The blocks are as tall as `scratch` (`elems` floats) allows:
// packed_gemm_tn_rows of them, the tallest from packed_gemm_tn_scratch_elems({n}) on. 1.3-1.9x OpenBLAS's AVX2
// kernels on an AVX-512 CPU (session 15).
void packed_gemm_tn(int m, int n, int k, const float* a, int lda, const float* b, int ldb, float* c, int ldc,
                    float* scratch, size_t elems, int variant = -1);
// Up to four such products of the same A in one pass (dW_ih and dW_hh from dG): each block of A is read
// and packed once for all of them, where A, a layer's dG, comes from memory (S's: 24 MB); bitwise one
// call per product. The scratch holds a K block of every B: packed_gemm_tn_scratch_elems({n1, n2, ...}).
struct TnProduct {
  const float* b;
  int ldb;
  int n;
  float* c;
  int ldc;
};
void packed_gemm_tn(int m, int k, const float* a, int lda, std::span<const TnProduct> products, float* scratch,
                    size_t elems, int variant = -1);
size_t packed_gemm_tn_scratch_elems(std::initializer_list<int> widths);
int packed_gemm_tn_rows(std::initializer_list<int> widths, size_t elems);
int packed_gemm_tn_tallest_rows();
// How many variants this CPU runs (1, 2 or 4: baseline, AVX2, AVX-512 in K blocks of 128 and of 512),
// each one's name, and the one variant -1 stands for.
int packed_gemm_variants();
const char* packed_gemm_variant_name(int variant);
int packed_gemm_best_variant();
// Whether that variant multiplies in K blocks of 512 (Zen 4 and Zen 5), where its weight gradients outrun even
// OpenBLAS's AVX-512 kernels (cpu_kernels.h, weight_gradients()).
bool packed_gemm_long_k_blocks();
// Whether that variant is an AVX-512 one.
bool packed_gemm_runs_avx512();

}  // namespace rnn_dist::cpu

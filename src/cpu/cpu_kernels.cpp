// CPU reference kernels (see cpu_kernels.h), explicitly instantiated for float and double.
#include "rnn_dist/cpu/cpu_kernels.h"

#include <cblas.h>

#include <algorithm>
#include <atomic>
#include <bit>
#include <climits>
#include <cmath>
#include <cstring>
#include <type_traits>

#include "rnn_dist/cpu/blas_kernels.h"
#include "rnn_dist/cpu/packed_gemm.h"
#include "rnn_dist/util/error.h"

namespace rnn_dist::cpu {

namespace {

// BLAS dimensions are int; a row count beyond that is a caller error, not something to wrap silently.
int blas_dim(int64_t n) {
  if (n < 0 || n > INT_MAX) throw Error(cat("matrix dimension ", n, " is outside the range BLAS accepts"));
  return static_cast<int>(n);
}

// The elementwise float kernels are compiled for AVX-512 and AVX2 as well as the baseline, and the loader
// picks the best the CPU has; double (the test oracle) keeps the portable build.
// (GCC only: clang refuses calls between the AVX clones and the always-inline helpers, whose ABIs differ.)
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__) && defined(__ELF__)
#define RNN_DIST_VECTOR_CLONES __attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))
#define RNN_DIST_CELL_VERSIONS 1  // the same three targets, with a body each (the cell's width differs)
#else
#define RNN_DIST_VECTOR_CLONES
#endif
#define RNN_DIST_INLINE [[gnu::always_inline]] inline
#define RNN_DIST_LAMBDA_INLINE __attribute__((always_inline))

// Eight float lanes as a GCC/Clang vector: written out explicitly because the compiler will not
// vectorise the branch-free selects below by itself (they are comparisons, which may trap under the
// default -ftrapping-math). On the baseline x86-64 target each operation becomes two SSE instructions.
// Only always-inlined helpers of this file return vectors (and take them by reference), so no call ever
// uses that ABI.
#if defined(__clang__)
#pragma clang diagnostic ignored "-Wpsabi"
#elif defined(__GNUC__)
#pragma GCC diagnostic ignored "-Wpsabi"
#endif
using F8 = float __attribute__((vector_size(32)));
using I8 = int32_t __attribute__((vector_size(32)));
constexpr int kLanes = 8;
// Sixteen lanes, one AVX-512 register: the LSTM cell's width on CPUs that have it (cell_forward).
using F16 = float __attribute__((vector_size(64)));
using I16 = int32_t __attribute__((vector_size(64)));

// The same code runs on float (loop tails) and on F8 or F16 (the body of every loop).
template <class V>
RNN_DIST_INLINE V splat(float c) {
  if constexpr (std::is_same_v<V, float>)
    return c;
  else
    return V{} + c;
}
template <class V>
RNN_DIST_INLINE V load(const float* p) {
  V v;
  std::memcpy(&v, p, sizeof(V));
  return v;
}
template <class V>
RNN_DIST_INLINE void store(float* p, const V& v) {
  std::memcpy(p, &v, sizeof(V));
}
RNN_DIST_INLINE float select(bool m, float a, float b) { return m ? a : b; }
RNN_DIST_INLINE F8 select(const I8& m, const F8& a, const F8& b) { return m ? a : b; }
RNN_DIST_INLINE int32_t bits(float x) { return std::bit_cast<int32_t>(x); }
RNN_DIST_INLINE I8 bits(const F8& x) { return std::bit_cast<I8>(x); }
RNN_DIST_INLINE float from_bits(int32_t x) { return std::bit_cast<float>(x); }
RNN_DIST_INLINE F8 from_bits(const I8& x) { return std::bit_cast<F8>(x); }
RNN_DIST_INLINE int32_t to_int(float x) { return static_cast<int32_t>(x); }
RNN_DIST_INLINE I8 to_int(const F8& x) { return __builtin_convertvector(x, I8); }
RNN_DIST_INLINE F16 select(const I16& m, const F16& a, const F16& b) { return m ? a : b; }
RNN_DIST_INLINE I16 bits(const F16& x) { return std::bit_cast<I16>(x); }
RNN_DIST_INLINE F16 from_bits(const I16& x) { return std::bit_cast<F16>(x); }
RNN_DIST_INLINE I16 to_int(const F16& x) { return __builtin_convertvector(x, I16); }

// Float exp, sigmoid and tanh with relative error about 2e-7 (libm's are scalar calls, which dominated
// the LSTM's elementwise time). Double keeps libm: it is the oracle of the finite-difference tests.
template <class V>
RNN_DIST_INLINE V exp_approx(const V& arg) {
  // Cephes expf: exp(x) = 2^n exp(r), |r| <= ln2/2, with a degree-6 polynomial for exp(r). The clamp keeps
  // 2^n a normal float.
  V x = select(arg < -87.0f, splat<V>(-87.0f), arg);
  x = select(x > 88.0f, splat<V>(88.0f), x);
  const V n = (x * 1.44269504088896341f + 12582912.0f) - 12582912.0f;  // round to nearest
  const V r = (x - n * 0.693359375f) + n * 2.12194440e-4f;
  V p = splat<V>(1.9875691500e-4f);
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  p = p * (r * r) + r + 1.0f;
  return p * from_bits((to_int(n) + 127) << 23);
}

template <class V>
RNN_DIST_INLINE V sigmoid_approx(const V& x) {
  return 1.0f / (1.0f + exp_approx(-x));
}

template <class V>
RNN_DIST_INLINE V tanh_approx(const V& x) {
  // Cephes tanhf: an odd polynomial below |x| = 0.625, (1 - e^-2|x|) / (1 + e^-2|x|) above, where it has
  // no cancellation. Both are computed and one selected, so there is no branch.
  const auto sign = bits(x) & int32_t(0x80000000);
  const V a = from_bits(bits(x) & 0x7fffffff), s = x * x;
  V p = splat<V>(-5.70498872745e-3f);
  p = p * s + 2.06390887954e-2f;
  p = p * s - 5.37397155531e-2f;
  p = p * s + 1.33314422036e-1f;
  p = p * s - 3.33332819422e-1f;
  const V small = p * s * x + x;
  const V e = exp_approx(-2.0f * a);
  const V large = from_bits(bits((1.0f - e) / (1.0f + e)) | sign);
  return select(a < 0.625f, small, large);
}

RNN_DIST_INLINE float act_sigmoid(float x) { return sigmoid_approx(x); }
RNN_DIST_INLINE F8 act_sigmoid(const F8& x) { return sigmoid_approx(x); }
RNN_DIST_INLINE float act_tanh(float x) { return tanh_approx(x); }
RNN_DIST_INLINE F8 act_tanh(const F8& x) { return tanh_approx(x); }
RNN_DIST_INLINE F16 act_sigmoid(const F16& x) { return sigmoid_approx(x); }
RNN_DIST_INLINE F16 act_tanh(const F16& x) { return tanh_approx(x); }
RNN_DIST_INLINE double act_sigmoid(double x) { return 1.0 / (1.0 + std::exp(-x)); }
RNN_DIST_INLINE double act_tanh(double x) { return std::tanh(x); }

// A loop over [begin, end) that runs body.template operator()<V>(j) on full vectors of lanes (float: Wide,
// then one F8 where Wide is F16) and then on the scalar tail (all of double). Every lane computes the same
// operations whatever the width, so the width does not change a result.
template <class T, class Wide = F8, class Body>
RNN_DIST_INLINE void for_lanes(int begin, int end, Body&& body) {
  int j = begin;
  if constexpr (std::is_same_v<T, float>) {
    constexpr int lanes = sizeof(Wide) / sizeof(float);
    for (; j + lanes <= end; j += lanes) body.template operator()<Wide>(j);
    if constexpr (lanes > kLanes)
      if (j + kLanes <= end) body.template operator()<F8>(j), j += kLanes;
  }
  for (; j < end; ++j) body.template operator()<T>(j);
}

// Loads and stores of lane type V from arrays of T (for double, V = T = double).
template <class V, class T>
RNN_DIST_INLINE V ld(const T* p) {
  if constexpr (std::is_same_v<V, T>)
    return *p;
  else
    return load<V>(p);
}
template <class V, class T>
RNN_DIST_INLINE void st(T* p, const V& v) {
  if constexpr (std::is_same_v<V, T>)
    *p = v;
  else
    store<V>(p, v);
}

// One time step of the cell over rows [0, bt) and hidden units [j0, j1): gates holds the pre-activations
// without biases (bt x 4H, blocks i, f, g, o); h gets o * tanh(c). Training (keep = true) stores the
// activated gates over the pre-activations and c_t in `cell`, reading c_{t-1} from c_prev (null = zeros);
// inference (keep = false) keeps nothing and updates the state `cell` in place (c_prev is not read).
template <class T, bool keep, class Wide = F8>
RNN_DIST_INLINE void cell_forward_impl(int bt, int H, int j0, int j1, T* gates, const T* b_ih, const T* b_hh,
                                       const T* c_prev, T* cell, T* h) {
  for (int b = 0; b < bt; ++b) {
    const int64_t s = static_cast<int64_t>(b) * H;
    T* gi = gates + 4 * s;
    T* c = cell + s;
    T* hb = h + s;
    const T* cp = keep ? (c_prev != nullptr ? c_prev + s : nullptr) : c;
    for_lanes<T, Wide>(j0, j1, [&]<class V>(int j) RNN_DIST_LAMBDA_INLINE {
      const V i = act_sigmoid(ld<V>(gi + j) + ld<V>(b_ih + j) + ld<V>(b_hh + j));
      const V f = act_sigmoid(ld<V>(gi + H + j) + ld<V>(b_ih + H + j) + ld<V>(b_hh + H + j));
      const V g = act_tanh(ld<V>(gi + 2 * H + j) + ld<V>(b_ih + 2 * H + j) + ld<V>(b_hh + 2 * H + j));
      const V o = act_sigmoid(ld<V>(gi + 3 * H + j) + ld<V>(b_ih + 3 * H + j) + ld<V>(b_hh + 3 * H + j));
      V cn = i * g;
      if (cp != nullptr) cn += f * ld<V>(cp + j);
      if constexpr (keep) {
        st(gi + j, i);
        st(gi + H + j, f);
        st(gi + 2 * H + j, g);
        st(gi + 3 * H + j, o);
      }
      st(c + j, cn);
      st(hb + j, o * act_tanh(cn));
    });
  }
}

// The gradient of one time step over rows [0, bt) and hidden units [j0, j1): gates (activated, bt x 4H)
// are overwritten with the gradients of the pre-activations; dh (bt x H) is dL/dh_t without dy_t (null =
// 0), which is added here; dc carries dL/dc_t in and dL/dc_{t-1} out. db (4H) accumulates the gate
// gradients' sums over the rows, the bias gradient, while they are in registers: summed after the time
// loop, they were a pass over all of dG from memory (6% of S's LSTM backward, Zen 5).
template <class T, class Wide = F8>
RNN_DIST_INLINE void cell_backward_impl(int bt, int H, int j0, int j1, T* gates, const T* cell, const T* c_prev,
                                        const T* dh, const T* dy, T* dc, T* db) {
  for (int b = 0; b < bt; ++b) {
    const int64_t s = static_cast<int64_t>(b) * H;
    T* gi = gates + 4 * s;
    const T* cb = cell + s;
    const T* dhb = dh + s;
    T* dcb = dc + s;
    const T* cp = c_prev != nullptr ? c_prev + s : nullptr;
    const T* dyb = dy != nullptr ? dy + s : nullptr;
    for_lanes<T, Wide>(j0, j1, [&]<class V>(int j) RNN_DIST_LAMBDA_INLINE {
      const V i = ld<V>(gi + j), f = ld<V>(gi + H + j), g = ld<V>(gi + 2 * H + j), o = ld<V>(gi + 3 * H + j);
      const V tc = act_tanh(ld<V>(cb + j));
      V dhj = ld<V>(dhb + j);
      if (dyb != nullptr) dhj += ld<V>(dyb + j);
      const V dct = ld<V>(dcb + j) + dhj * o * (T(1) - tc * tc);
      const V di = dct * g * i * (T(1) - i);
      const V df = cp != nullptr ? dct * ld<V>(cp + j) * f * (T(1) - f) : dct * T(0);
      const V dg = dct * i * (T(1) - g * g);
      const V dout = dhj * tc * o * (T(1) - o);
      st(gi + j, di);
      st(gi + H + j, df);
      st(gi + 2 * H + j, dg);
      st(gi + 3 * H + j, dout);
      st(db + j, ld<V>(db + j) + di);
      st(db + H + j, ld<V>(db + H + j) + df);
      st(db + 2 * H + j, ld<V>(db + 2 * H + j) + dg);
      st(db + 3 * H + j, ld<V>(db + 3 * H + j) + dout);
      st(dcb + j, dct * f);
    });
  }
}

// The float cell in three versions, the loader picking the best the CPU runs: AVX-512's in sixteen lanes
// (eight left its upper halves idle), AVX2's and the baseline's in eight.
template <class Wide>
RNN_DIST_INLINE void cell_forward_float(int bt, int H, int j0, int j1, float* gates, const float* b_ih,
                                        const float* b_hh, const float* c_prev, float* cell, float* h, bool keep) {
  if (keep)
    cell_forward_impl<float, true, Wide>(bt, H, j0, j1, gates, b_ih, b_hh, c_prev, cell, h);
  else
    cell_forward_impl<float, false, Wide>(bt, H, j0, j1, gates, b_ih, b_hh, c_prev, cell, h);
}
#ifdef RNN_DIST_CELL_VERSIONS
[[gnu::target("arch=x86-64-v4")]] void cell_forward(int bt, int H, int j0, int j1, float* gates, const float* b_ih,
                                                   const float* b_hh, const float* c_prev, float* cell, float* h,
                                                   bool keep_gates) {
  cell_forward_float<F16>(bt, H, j0, j1, gates, b_ih, b_hh, c_prev, cell, h, keep_gates);
}
[[gnu::target("arch=x86-64-v3")]] void cell_forward(int bt, int H, int j0, int j1, float* gates, const float* b_ih,
                                                   const float* b_hh, const float* c_prev, float* cell, float* h,
                                                   bool keep_gates) {
  cell_forward_float<F8>(bt, H, j0, j1, gates, b_ih, b_hh, c_prev, cell, h, keep_gates);
}
[[gnu::target("default")]]
#endif
void cell_forward(int bt, int H, int j0, int j1, float* gates, const float* b_ih, const float* b_hh,
                  const float* c_prev, float* cell, float* h, bool keep_gates) {
  cell_forward_float<F8>(bt, H, j0, j1, gates, b_ih, b_hh, c_prev, cell, h, keep_gates);
}
void cell_forward(int bt, int H, int j0, int j1, double* gates, const double* b_ih, const double* b_hh,
                  const double* c_prev, double* cell, double* h, bool keep_gates) {
  if (keep_gates)
    cell_forward_impl<double, true>(bt, H, j0, j1, gates, b_ih, b_hh, c_prev, cell, h);
  else
    cell_forward_impl<double, false>(bt, H, j0, j1, gates, b_ih, b_hh, c_prev, cell, h);
}

#ifdef RNN_DIST_CELL_VERSIONS
[[gnu::target("arch=x86-64-v4")]] void cell_backward(int bt, int H, int j0, int j1, float* gates, const float* cell,
                                                    const float* c_prev, const float* dh, const float* dy,
                                                    float* dc, float* db) {
  cell_backward_impl<float, F16>(bt, H, j0, j1, gates, cell, c_prev, dh, dy, dc, db);
}
[[gnu::target("arch=x86-64-v3")]] void cell_backward(int bt, int H, int j0, int j1, float* gates, const float* cell,
                                                    const float* c_prev, const float* dh, const float* dy,
                                                    float* dc, float* db) {
  cell_backward_impl<float, F8>(bt, H, j0, j1, gates, cell, c_prev, dh, dy, dc, db);
}
[[gnu::target("default")]]
#endif
void cell_backward(int bt, int H, int j0, int j1, float* gates, const float* cell, const float* c_prev,
                   const float* dh, const float* dy, float* dc, float* db) {
  cell_backward_impl<float, F8>(bt, H, j0, j1, gates, cell, c_prev, dh, dy, dc, db);
}
void cell_backward(int bt, int H, int j0, int j1, double* gates, const double* cell, const double* c_prev,
                   const double* dh, const double* dy, double* dc, double* db) {
  cell_backward_impl<double>(bt, H, j0, j1, gates, cell, c_prev, dh, dy, dc, db);
}

// Adds the sums of columns [c0, c1) of m (rows x cols) to acc.
template <class T>
void add_colsum(const T* __restrict m, int64_t rows, int cols, int c0, int c1, T* __restrict acc) {
  for (int64_t r = 0; r < rows; ++r) {
    const T* __restrict row = m + r * cols;
    for (int k = c0; k < c1; ++k) acc[k] += row[k];
  }
}

// Member's units [j0, j1) of every gate block of the bias sums (4H) start at zero, or go to both LSTM
// biases' gradients, which are the same.
template <class T>
void clear_bias_sums(int H, int j0, int j1, T* sums) {
  for (int g = 0; g < 4; ++g) std::fill(sums + g * H + j0, sums + g * H + j1, T(0));
}
template <class T>
void add_bias_sums(int H, int j0, int j1, const T* sums, T* b_ih, T* b_hh) {
  for (int g = 0; g < 4; ++g)
    for (int j = g * H + j0; j < g * H + j1; ++j) {
      b_ih[j] += sums[j];
      b_hh[j] += sums[j];
    }
}

// Copies columns [c0, c1) of `rows` rows between two matrices with `cols` columns.
template <class T>
void copy_cols(const T* src, int64_t rows, int cols, int c0, int c1, T* dst) {
  for (int64_t r = 0; r < rows; ++r) std::copy(src + r * cols + c0, src + r * cols + c1, dst + r * cols + c0);
}

// fn(member, members) on every member of the team, or fn(0, 1) on this thread without one.
template <class Fn>
void parallel(Team* team, Fn&& fn) {
  if (team == nullptr || team->size() == 1) return fn(0, 1);
  team->run([&](int m) { fn(m, team->size()); });
}
void sync(Team* team) {
  if (team != nullptr && team->size() > 1) team->barrier();
}

template <class I>
std::pair<int, int> int_share(I n, int parts, int m, int64_t align = 1) {
  const auto [b, e] = share(static_cast<int64_t>(n), parts, m, align);
  return {static_cast<int>(b), static_cast<int>(e)};
}

// Cross-entropy of float logits (targets already checked): exponentials in float lanes, log-sum-exp and
// the loss in double.
RNN_DIST_VECTOR_CLONES double cross_entropy_float(const float* logits, int64_t rows, int vocab,
                                                  const int32_t* targets, float* dlogits, float grad_scale) {
  double total = 0;
  for (int64_t r = 0; r < rows; ++r) {
    const int32_t target = targets[r];  // checked by the caller
    const float* l = logits + r * vocab;
    F8 vmax = splat<F8>(l[0]);
    float max = l[0];
    for_lanes<float>(0, vocab, [&]<class V>(int k) RNN_DIST_LAMBDA_INLINE {
      const V v = load<V>(l + k);
      if constexpr (std::is_same_v<V, F8>)
        vmax = select(v > vmax, v, vmax);
      else
        max = v > max ? v : max;
    });
    for (int u = 0; u < kLanes; ++u) max = vmax[u] > max ? vmax[u] : max;
    F8 vsum = splat<F8>(0);
    double sum = 0;
    for_lanes<float>(0, vocab, [&]<class V>(int k) RNN_DIST_LAMBDA_INLINE {
      const V e = exp_approx(load<V>(l + k) - max);
      if constexpr (std::is_same_v<V, F8>)
        vsum += e;
      else
        sum += e;
    });
    for (int u = 0; u < kLanes; ++u) sum += vsum[u];
    total += static_cast<double>(max) + std::log(sum) - static_cast<double>(l[target]);
    if (dlogits != nullptr) {
      // Reads l[k] before writing d[k], so d may be l; the target's entry is fixed up afterwards.
      float* d = dlogits + r * vocab;
      const float coef = static_cast<float>(static_cast<double>(grad_scale) / sum), lt = l[target];
      for_lanes<float>(0, vocab, [&]<class V>(int k) RNN_DIST_LAMBDA_INLINE {
        store<V>(d + k, exp_approx(load<V>(l + k) - max) * coef);
      });
      d[target] = exp_approx(lt - max) * coef - grad_scale;
    }
  }
  return total;
}

RNN_DIST_VECTOR_CLONES void activation_float_impl(Activation a, const float* x, int64_t n, float* y) {
  for (int64_t i0 = 0; i0 < n; i0 += 1 << 20) {
    const int len = static_cast<int>(std::min<int64_t>(n - i0, 1 << 20));
    for_lanes<float>(0, len, [&]<class V>(int k) RNN_DIST_LAMBDA_INLINE {
      const V v = load<V>(x + i0 + k);
      store<V>(y + i0 + k, a == Activation::exp ? exp_approx(v) : a == Activation::sigmoid ? act_sigmoid(v) : act_tanh(v));
    });
  }
}

}  // namespace

void activation_float(Activation a, const float* x, int64_t n, float* y) { activation_float_impl(a, x, n, y); }

template <class T>
void gemm(bool trans_a, bool trans_b, int m, int n, int k, std::type_identity_t<T> alpha, const T* a, int lda,
          const T* b, int ldb, std::type_identity_t<T> beta, T* c, int ldc) {
  if (m == 0 || n == 0) return;
  const CBLAS_TRANSPOSE ta = trans_a ? CblasTrans : CblasNoTrans;
  const CBLAS_TRANSPOSE tb = trans_b ? CblasTrans : CblasNoTrans;
  if constexpr (std::is_same_v<T, float>)
    cblas_sgemm(CblasRowMajor, ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
  else
    cblas_dgemm(CblasRowMajor, ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
}

size_t lstm_cache_elems(int64_t rows, int hidden, int proj) {
  return static_cast<size_t>(rows) * (proj > 0 ? 6 * hidden + proj : 6 * hidden);
}

template <class T>
LstmLayerCache<T> lstm_cache_view(T* base, int64_t rows, int hidden, int proj) {
  T* gates = base;
  T* cell = gates + rows * 4 * hidden;
  T* h_prev = cell + rows * hidden;
  T* m = proj > 0 ? h_prev + rows * proj : nullptr;
  return {gates, cell, h_prev, m};
}

size_t lstm_backward_workspace_elems(int64_t rows, int batch, int hidden, int proj) {
  // The carried dh and dc (B x H each) and the bias gradient's sums (4H); the gate gradients go over
  // cache.gates. With a projection: dh is B x P, and each row's whole dL/dh_t (rows x P, for dW_hr) and a
  // step's dL/dm_t (B x H) are kept too.
  const size_t sums = static_cast<size_t>(4) * hidden;
  if (proj > 0) return static_cast<size_t>(batch) * (proj + 2 * hidden) + static_cast<size_t>(rows) * proj + sums;
  return static_cast<size_t>(batch) * 2 * hidden + sums;
}

namespace {

// Rows of input projection the inference pass computes at once: big enough for an efficient GEMM, small
// enough that the gate buffer does not grow with the batch's length.
constexpr int64_t kInferenceChunkRows = 4096;

int64_t inference_chunk_rows(int64_t rows, int batch) {
  return std::min(rows, std::max<int64_t>(kInferenceChunkRows, batch));
}

// gates[:, units j0..j1 of each gate block] (beta = 1: added to) += a (m x k) times the matching rows of w
// (4H x k, PyTorch's gate-major layout), as four GEMMs; the member owning these units needs no other's.
template <class T>
void gate_gemm(int m, int H, int j0, int j1, int k, const T* a, const T* w, T beta, T* gates) {
  for (int q = 0; q < 4; ++q)
    gemm<T>(false, true, m, j1 - j0, k, T(1), a, k, w + static_cast<int64_t>(q * H + j0) * k, k, beta,
            gates + q * H + j0, 4 * H);
}

// C (m x n, ldc) = A (m x k, lda) times W^T (transposed: W is n x k) or W (k x n), W of leading dimension
// ldw: the packed product where W was packed for it (float), else BLAS.
template <class T>
void weights_product(int m, int n, int k, const T* a, int lda, bool transposed, const T* w, int ldw,
                     const float* packed, T* c, int ldc) {
  if constexpr (std::is_same_v<T, float>) {
    if (packed != nullptr) return packed_gemm(m, n, k, a, lda, packed, false, c, ldc);
  }
  gemm<T>(false, transposed, m, n, k, T(1), a, lda, w, ldw, T(0), c, ldc);
}

// gates (m x 4H) = x (m x k) w^T (w: 4H x k), member m's share of the rows in one product over every
// column (packed for float, BLAS for double): a quarter of gate_gemm's calls, each 4 times as wide, which
// OpenBLAS ran faster (S's layers: 129 and 164 GFLOP/s against 109 and 145 for four quarter-wide ones;
// with two members 128 and 164 against 101 and 134 for their eighth-wide ones). The caller's next barrier
// makes every row complete.
template <class T>
void input_projection(int rows, int H, int k, const T* x, const T* w, const float* packed_w, T* gates, int member,
                      int members) {
  const auto [r0, r1] = int_share(rows, members, member);
  weights_product<T>(r1 - r0, 4 * H, k, x + int64_t{r0} * k, k, true, w, k, packed_w, gates + int64_t{r0} * 4 * H, 4 * H);
}

// Member m's rows of dx (rows x I) = dG (rows x 4H) W_ih (4H x I).
template <class T>
void input_gradient(int rows, int G, int I, const T* dgates, const T* w_ih, const float* packed_w, T* dx, int member,
                    int members) {
  const auto [r0, r1] = int_share(rows, members, member);
  weights_product<T>(r1 - r0, I, G, dgates + int64_t{r0} * G, G, false, w_ih, I, packed_w, dx + int64_t{r0} * I, I);
}

// Member m's share of W_ih (4H x I) packed, as the input projection's B (W_ih^T, I x 4H) or as dx's (W_ih).
// The caller's next barrier completes it.
void pack_input_weights(const float* w_ih, int G, int I, bool transposed, float* packed, int member, int members) {
  if (transposed)
    pack_b_part(w_ih, 1, I, I, G, packed, member, members);
  else
    pack_b_part(w_ih, I, 1, G, I, packed, member, members);
}

// Output columns of the projection go to members in multiples of 16: OpenBLAS 0.3.21's small-matrix
// kernel for a non-transposed product mallocs a buffer on every call whose N is not a multiple of 16,
// which a step of dL/dh_{t-1} = dG_t W_hh[:, p0:p1] would then do every time step.
constexpr int64_t kProjColumns = 16;

// Elements of each member's part of the packed recurrent weights: units [j0, j1) of every gate block of
// W_hh for the forward pass (4 blocks of packed_elems(R, j1 - j0)), or the columns of W_hh that give the
// member's part of dh_{t-1} for the backward pass (K = 4H); the largest of any member's. At least
// packed_gemm_tn's scratch for whole K blocks of the layer's weight gradients (N = input and R in one pass,
// or H), which use the part after the backward time loop: so that how they are multiplied depends on
// weight_gradients() alone, not on the thread count. The members' parts together hold all of W_hh packed
// (each part's 4 x packed_elems(R, units) rounds its units up to whole panels), which inference by
// sequences packs over them.
size_t recurrent_packed_stride(int input, int hidden, int proj, int members) {
  const int R = proj > 0 ? proj : hidden;
  size_t stride = std::max(packed_gemm_tn_scratch_elems({input, R}), packed_gemm_tn_scratch_elems({hidden}));
  for (int m = 0; m < members; ++m) {
    const auto [j0, j1] = share(hidden, members, m, kLanes);
    const auto [p0, p1] = share(R, members, m, kProjColumns);
    const int units = static_cast<int>(j1 - j0), cols = static_cast<int>(proj > 0 ? p1 - p0 : j1 - j0);
    stride = std::max({stride, 4 * packed_elems(R, units), packed_elems(4 * hidden, cols)});
  }
  return stride;
}

// Member m's part of the packed recurrent weights (float only; null without them).
float* member_packed(float* packed, int I, int H, int P, int members, int m) {
  if (packed == nullptr) return nullptr;
  return packed + static_cast<int64_t>(m) * static_cast<int64_t>(recurrent_packed_stride(I, H, P, members));
}

// The team's packed input weights, after every member's recurrent part (null without packed weights).
float* input_packed(float* packed, int I, int H, int P, int members) {
  if (packed == nullptr) return nullptr;
  return packed + static_cast<int64_t>(members) * static_cast<int64_t>(recurrent_packed_stride(I, H, P, members));
}

// Packs units [j0, j1) of each gate block of w_hh (4H x R) as the transposes the forward products need.
void pack_gate_blocks(const float* w_hh, int H, int R, int j0, int j1, float* packed) {
  const size_t block = packed_elems(R, j1 - j0);
  for (int q = 0; q < 4; ++q) pack_b(w_hh + static_cast<int64_t>(q * H + j0) * R, 1, R, R, j1 - j0, packed + q * block);
}

// gates[:, units c0..c1 of each gate block] += h (m x R) W_hh^T, a chunk of the member's units [j0, j1)
// (c0 - j0 a multiple of 16, whole panels of its packed blocks): the packed product when the weights were
// packed (float), else BLAS.
template <class T>
void recurrent_gates(int m, int H, int j0, int j1, int c0, int c1, int R, const T* h, const T* w_hh,
                     const float* packed, T* gates) {
  if constexpr (std::is_same_v<T, float>) {
    if (packed != nullptr) {
      const auto block = static_cast<int64_t>(packed_elems(R, j1 - j0));
      return packed_gemm_blocks(m, c1 - c0, R, h, R, 4, packed + packed_elems(R, c0 - j0), block, true, gates + c0,
                                4 * H, H);
    }
  }
  gate_gemm<T>(m, H, c0, c1, R, h, w_hh, T(1), gates);
}

// Units per chunk of a time step (whole panels): the chunk's gates, rows x 4 x units floats, up to 128 kB,
// stay in L2 from the recurrent product to the cell update (64 kB chunks were slower, 256 kB no faster);
// at least 128 units, since the packed kernel loses at narrower products (L's recurrent product over 64
// units a call ran 0.97x, over 128 0.99x the member's 512 in one call).
int step_chunk_units(int rows) { return std::max(128, 32 * 1024 / (4 * std::max(rows, 1)) / 16 * 16); }

// One time step of a member's units [j0, j1) over rows [0, bt): gates += h_prev W_hh^T (h_prev null: zero),
// then the cell (cell_forward's arguments), chunk by chunk of units, so that the cell reads each chunk's
// gates while they are in L2; after the whole product (L: 512 kB a member) they came back from memory. L's
// forward pass on 2 threads 1.02-1.11x faster, S's and B's steps are one chunk (Zen 4, docs/benchmarks.md,
// session 27). The chunks change no result: each gate is the same product, each cell the same lanes.
template <class T>
void lstm_step(int bt, int H, int j0, int j1, int R, const T* h_prev, const T* w_hh, const float* packed, T* gates,
               const T* b_ih, const T* b_hh, const T* c_prev, T* cell, T* h, bool keep) {
  const int chunk = step_chunk_units(bt);
  for (int c0 = j0; c0 < j1; c0 += chunk) {
    const int c1 = std::min(j1, c0 + chunk);
    if (h_prev != nullptr) recurrent_gates<T>(bt, H, j0, j1, c0, c1, R, h_prev, w_hh, packed, gates);
    cell_forward(bt, H, c0, c1, gates, b_ih, b_hh, c_prev, cell, h, keep);
  }
}

// dw (m x n, ldw) += a^T b (a: rows x m, lda; b: rows x n, ldb), a weight gradient: on the packed kernel
// where weight_gradients() says so, in the scratch of the member's part of the packed recurrent weights
// (free once the time loop is done; recurrent_packed_stride reserves whole K blocks), else BLAS.
template <class T>
void weight_gradient(int m, int n, int rows, const T* a, int lda, const T* b, int ldb, T* dw, int ldw, float* scratch,
                     size_t scratch_elems) {
  if constexpr (std::is_same_v<T, float>) {
    if (scratch != nullptr && weight_gradients() == WeightGradients::packed)
      return packed_gemm_tn(m, n, rows, a, lda, b, ldb, dw, ldw, scratch, scratch_elems);
  }
  gemm<T>(true, false, m, n, rows, T(1), a, lda, b, ldb, T(1), dw, ldw);
}

// Output rows [g0, g1) of dW_ih += dG^T x (x: rows x I) and dW_hh += dG^T h_prev (rows x R), as two
// weight_gradient calls would make them; on the packed kernel in one pass over dG, which then comes from
// memory once, not twice.
template <class T>
void input_and_recurrent_gradients(int g0, int g1, int rows, const T* dg, int G, const T* x, int I, const T* h_prev,
                                   int R, LstmLayerGrads<T> grads, float* scratch, size_t scratch_elems) {
  if constexpr (std::is_same_v<T, float>) {
    if (scratch != nullptr && weight_gradients() == WeightGradients::packed) {
      const TnProduct products[] = {{x, I, I, grads.w_ih + int64_t{g0} * I, I},
                                    {h_prev, R, R, grads.w_hh + int64_t{g0} * R, R}};
      return packed_gemm_tn(g1 - g0, rows, dg + g0, G, products, scratch, scratch_elems);
    }
  }
  weight_gradient<T>(g1 - g0, I, rows, dg + g0, G, x, I, grads.w_ih + int64_t{g0} * I, I, scratch, scratch_elems);
  weight_gradient<T>(g1 - g0, R, rows, dg + g0, G, h_prev, R, grads.w_hh + int64_t{g0} * R, R, scratch,
                     scratch_elems);
}

// Columns [c0, c1) of dh (m x R) = dG (m x 4H) W_hh (4H x R).
template <class T>
void recurrent_dh(int m, int c0, int c1, int G, const T* dg, const T* w_hh, int R, const float* packed, T* dh) {
  weights_product<T>(m, c1 - c0, G, dg, G, false, w_hh + c0, R, packed, dh + c0, R);
}

std::atomic<WeightGradients>& weight_gradients_choice() {
  static std::atomic<WeightGradients> how{
      (blas_kernels_leave_avx512_unused() && packed_gemm_runs_avx512()) || packed_gemm_long_k_blocks()
          ? WeightGradients::packed
          : WeightGradients::blas};
  return how;
}

}  // namespace

WeightGradients weight_gradients() { return weight_gradients_choice().load(std::memory_order_relaxed); }
void set_weight_gradients(WeightGradients how) { weight_gradients_choice().store(how, std::memory_order_relaxed); }

size_t lstm_packed_elems(int input, int hidden, int proj, int members) {
  return recurrent_packed_stride(input, hidden, proj, members) * static_cast<size_t>(members) +
         std::max(packed_elems(input, 4 * hidden), packed_elems(4 * hidden, input));
}

// The gates of a chunk of rows (at least B, the rows inference by sequences uses: each member's of one
// step), then the B x H cell states.
size_t lstm_inference_workspace_elems(int64_t rows, int batch, int hidden, int proj) {
  if (proj > 0) return lstm_cache_elems(rows, hidden, proj);
  return static_cast<size_t>(inference_chunk_rows(rows, batch)) * 4 * hidden + static_cast<size_t>(batch) * hidden;
}

namespace {

// Each sequence's final state sits at the row of its own last step: hn (B x R) from y's columns [q0, q1),
// cn (B x H) from the cells' [j0, j1) (each null: not wanted).
template <class T>
void copy_final_states(const Packing& packing, const T* y, int R, int q0, int q1, const T* cell, int H, int j0,
                       int j1, T* hn, T* cn) {
  for (int b = 0; b < packing.batch(); ++b) {
    const int64_t r = packing.row(packing.lengths[b] - 1, b);
    if (hn != nullptr) std::copy(y + r * R + q0, y + r * R + q1, hn + static_cast<int64_t>(b) * R + q0);
    if (cn != nullptr) std::copy(cell + r * H + j0, cell + r * H + j1, cn + static_cast<int64_t>(b) * H + j0);
  }
}

// The layer with a projection (nn.LSTM(proj_size=P)) goes through lstm_layer_forward too, and backward
// through lstm_proj_backward: members own hidden units [j0, j1) for the gates and the cell, as without
// one, and output columns [p0, p1) of h_t = m_t W_hr^T.
// Its backward pass, a step at a time from the last: dL/dm_t = dL/dh_t W_hr (units, once dL/dh_t is
// complete), the cell's gate gradients (units), a barrier, dL/dh_{t-1} = dG_t W_hh plus dy_{t-1}
// (output columns), a barrier. dW_hr is one GEMM at the end over every row's dL/dh_t, kept in dh_all.
template <class T>
void lstm_proj_backward(const Packing& packing, const LstmLayerParams<T>& p, const T* x, const T* c0,
                        LstmLayerCache<T> cache, const T* dy, const T* dhn, const T* dcn, T* dx, T* dh0, T* dc0,
                        LstmLayerGrads<T> grads, T* workspace, Team* team, float* packed) {
  const int H = p.hidden, P = p.proj, G = 4 * H, I = p.input, B = packing.batch();
  const int rows = blas_dim(packing.rows());
  T* dgates = cache.gates;
  T* dh = workspace;            // B x P: dL/dh of each sequence's step in progress (dhn until it starts)
  T* dc = dh + int64_t{B} * P;  // B x H
  T* dm = dc + int64_t{B} * H;  // B x H: dL/dm of the step in progress
  T* dh_all = dm + int64_t{B} * H;  // rows x P: dL/dh_t of every row, dy included
  T* bias_sums = dh_all + int64_t{rows} * P;  // 4H
  // dh_all's rows of step t: dh of its active sequences plus dy.
  auto whole_dh = [&](int t, int q0, int q1) {
    const int64_t off = packing.step_offset[t];
    for (int b = 0; b < packing.batch_sizes[t]; ++b)
      for (int k = q0; k < q1; ++k) dh_all[(off + b) * P + k] = dh[int64_t{b} * P + k] + (dy ? dy[(off + b) * P + k] : T(0));
  };
  parallel(team, [&](int m, int members) {
    const auto [j0, j1] = int_share(H, members, m, kLanes);
    const auto [p0, p1] = int_share(P, members, m, kProjColumns);
    float* mine = member_packed(packed, I, H, P, members, m);
    float* in_w = dx != nullptr ? input_packed(packed, I, H, P, members) : nullptr;
    if constexpr (std::is_same_v<T, float>) {
      if (mine != nullptr) pack_b(p.w_hh + p0, P, 1, G, p1 - p0, mine);
      if (in_w != nullptr) pack_input_weights(p.w_ih, G, I, false, in_w, m, members);  // the barrier below completes it
    }
    for (int b = 0; b < B; ++b) {
      for (int k = p0; k < p1; ++k) dh[int64_t{b} * P + k] = dhn ? dhn[int64_t{b} * P + k] : T(0);
      for (int j = j0; j < j1; ++j) dc[int64_t{b} * H + j] = dcn ? dcn[int64_t{b} * H + j] : T(0);
    }
    clear_bias_sums(H, j0, j1, bias_sums);
    if (packing.steps() > 0) whole_dh(packing.steps() - 1, p0, p1);
    sync(team);
    for (int t = packing.steps() - 1; t >= 0; --t) {
      const int bt = packing.batch_sizes[t];
      const int64_t off = packing.step_offset[t];
      gemm<T>(false, false, bt, j1 - j0, P, T(1), dh_all + off * P, P, p.w_hr + j0, H, T(0), dm + j0, H);
      const T* c_prev = t > 0 ? cache.cell + packing.step_offset[t - 1] * H : c0;
      T* dg_t = dgates + off * G;
      cell_backward(bt, H, j0, j1, dg_t, cache.cell + off * H, c_prev, dm, nullptr, dc, bias_sums);
      sync(team);
      if (t > 0 || dh0 != nullptr) recurrent_dh<T>(bt, p0, p1, G, dg_t, p.w_hh, P, mine, dh);
      if (t > 0) whole_dh(t - 1, p0, p1);
      sync(team);
    }
    for (int b = 0; b < B; ++b) {
      if (dh0 != nullptr) std::copy(dh + int64_t{b} * P + p0, dh + int64_t{b} * P + p1, dh0 + int64_t{b} * P + p0);
      if (dc0 != nullptr) std::copy(dc + int64_t{b} * H + j0, dc + int64_t{b} * H + j1, dc0 + int64_t{b} * H + j0);
    }
    const auto [g0, g1] = int_share(G, members, m);
    const size_t scratch = recurrent_packed_stride(I, H, P, members);
    input_and_recurrent_gradients<T>(g0, g1, rows, dgates, G, x, I, cache.h_prev, P, grads, mine, scratch);
    add_bias_sums(H, j0, j1, bias_sums, grads.b_ih, grads.b_hh);
    weight_gradient<T>(p1 - p0, H, rows, dh_all + p0, P, cache.m, H, grads.w_hr + int64_t{p0} * H, H, mine, scratch);
    if (dx != nullptr) input_gradient<T>(rows, G, I, dgates, p.w_ih, in_w, dx, m, members);
  });
}

}  // namespace

// Each member owns hidden units [j0, j1) (in every gate block) for the whole pass: it computes their input
// projection, their recurrent pre-activations and their cell update, so members meet only once a step,
// when h_t is complete for the next step's recurrent product. With a projection, the cell writes
// m_t = o_t * tanh(c_t) to the cache, and a second meeting completes it before each member projects its
// output columns [q0, q1) of h_t = m_t W_hr^T.
template <class T>
void lstm_layer_forward(const Packing& packing, const LstmLayerParams<T>& p, const T* x, Nullable<const T> h0,
                        Nullable<const T> c0, T* y, Nullable<T> hn, Nullable<T> cn, LstmLayerCache<T> cache,
                        Team* team, float* packed) {
  const int H = p.hidden, R = p.out(), I = p.input;
  const bool proj = p.proj > 0;
  const int rows = blas_dim(packing.rows());
  parallel(team, [&](int m, int members) {
    const auto [j0, j1] = int_share(H, members, m, kLanes);
    const auto [q0, q1] = proj ? int_share(R, members, m, kProjColumns) : std::pair{j0, j1};
    float* mine = member_packed(packed, I, H, p.proj, members, m);
    float* in_w = input_packed(packed, I, H, p.proj, members);
    if constexpr (std::is_same_v<T, float>) {
      if (mine != nullptr) {
        pack_gate_blocks(p.w_hh, H, R, j0, j1, mine);
        pack_input_weights(p.w_ih, 4 * H, I, true, in_w, m, members);
        sync(team);
      }
    }
    // Input projection of every step at once; the biases are added in the cell update.
    input_projection<T>(rows, H, I, x, p.w_ih, in_w, cache.gates, m, members);
    sync(team);
    for (int t = 0; t < packing.steps(); ++t) {
      const int bt = packing.batch_sizes[t];
      const int64_t off = packing.step_offset[t];
      // h_{t-1} of the active sequences is a prefix of the previous step's rows (or h0); a zero h0
      // contributes nothing. cache.h_prev keeps it row by row for the single dW_hh GEMM of backward.
      const T* h_prev = t > 0 ? y + packing.step_offset[t - 1] * R : h0;
      if (h_prev != nullptr)
        copy_cols(h_prev, bt, R, q0, q1, cache.h_prev + off * R);
      else
        for (int b = 0; b < bt; ++b) std::fill(cache.h_prev + (off + b) * R + q0, cache.h_prev + (off + b) * R + q1, T(0));
      const T* c_prev = t > 0 ? cache.cell + packing.step_offset[t - 1] * H : c0;
      lstm_step<T>(bt, H, j0, j1, R, h_prev, p.w_hh, mine, cache.gates + off * 4 * H, p.b_ih, p.b_hh, c_prev,
                   cache.cell + off * H, proj ? cache.m + off * H : y + off * H, true);
      sync(team);
      if (!proj) continue;
      gemm<T>(false, true, bt, q1 - q0, H, T(1), cache.m + off * H, H, p.w_hr + int64_t{q0} * H, H, T(0),
              y + off * R + q0, R);
      sync(team);
    }
    copy_final_states(packing, y, R, q0, q1, cache.cell, H, j0, j1, hn, cn);
  });
}

// Sequences per member from which inference splits the batch's sequences between the members, not the
// hidden units: on average enough rows for the products' register tiles (6 and 8; shares go by tokens, so
// the first members get fewer, longer sequences), and sampling's single sequence still gets every member.
constexpr int kSequencesPerMember = 16;

// Member m's sequences [s0, s1): consecutive, about rows / members tokens each, a sequence going to the
// part where its middle token falls (lengths do not increase: the first members get fewer, longer
// sequences; a member may get none).
std::pair<int, int> sequence_share(const Packing& packing, int members, int m) {
  const auto first = [&](int part) {
    const int64_t boundary = packing.rows() * part / members;
    int b = 0;
    for (int64_t tokens = 0; b < packing.batch() && 2 * tokens + packing.lengths[b] <= 2 * boundary;)
      tokens += packing.lengths[b++];
    return b;
  };
  return {first(m), m + 1 == members ? packing.batch() : first(m + 1)};
}

// Inference with each member taking its own sequences through every step: the time loop has no barrier,
// which split hidden units need at every step (they made eval's two threads wait for each other about a
// tenth of the time on a shared 2-core host; docs/benchmarks.md, session 22). A step is the member's rows
// of it: the input product, the recurrent one, then the cell; the gates stay one step's, in the member's
// rows of the workspace. Every member reads the whole of W_hh, packed over the members' parts (which
// recurrent_packed_stride sizes to hold it).
template <class T>
void inference_by_sequences(const Packing& packing, const LstmLayerParams<T>& p, const T* x, Nullable<const T> h0,
                            Nullable<const T> c0, T* y, Nullable<T> hn, Nullable<T> cn, T* workspace, Team* team,
                            float* packed) {
  const int H = p.hidden, G = 4 * H, I = p.input, B = packing.batch();
  T* cell = workspace + static_cast<int64_t>(B) * G;  // B x H: each sequence's c, updated in place
  parallel(team, [&](int m, int members) {
    float* w_hh = packed;
    float* w_ih = input_packed(packed, I, H, 0, members);
    if constexpr (std::is_same_v<T, float>) {
      if (packed != nullptr) {
        const auto block = static_cast<int64_t>(packed_elems(H, H));
        for (int q = 0; q < 4; ++q)
          pack_b_part(p.w_hh + static_cast<int64_t>(q) * H * H, 1, H, H, H, w_hh + q * block, m, members);
        pack_input_weights(p.w_ih, G, I, true, w_ih, m, members);
        sync(team);
      }
    }
    const auto [s0, s1] = sequence_share(packing, members, m);
    T* gates = workspace + static_cast<int64_t>(s0) * G;
    const int64_t state0 = static_cast<int64_t>(s0) * H, state1 = static_cast<int64_t>(s1) * H;
    if (c0 != nullptr)
      std::copy(c0 + state0, c0 + state1, cell + state0);
    else
      std::fill(cell + state0, cell + state1, T(0));
    for (int t = 0; t < packing.steps(); ++t) {
      const int rows = std::min(s1, packing.batch_sizes[t]) - s0;
      if (rows <= 0) break;
      const int64_t off = packing.step_offset[t] + s0;
      weights_product<T>(rows, G, I, x + off * I, I, true, p.w_ih, I, w_ih, gates, G);
      const T* h_prev = t > 0 ? y + (packing.step_offset[t - 1] + s0) * H : h0 != nullptr ? h0 + state0 : nullptr;
      // The whole product, then the cell: this step's gates are the workspace of every step, already in cache,
      // and lstm_step's chunks ran B's evaluation 0.92-0.95x as fast (its 128 or 256 rows give narrow chunks).
      if (h_prev != nullptr) recurrent_gates<T>(rows, H, 0, H, 0, H, H, h_prev, p.w_hh, w_hh, gates);
      cell_forward(rows, H, 0, H, gates, p.b_ih, p.b_hh, nullptr, cell + state0, y + off * H, false);
    }
    for (int b = s0; b < s1; ++b) {
      const int64_t r = packing.row(packing.lengths[b] - 1, b), s = static_cast<int64_t>(b) * H;
      if (hn != nullptr) std::copy(y + r * H, y + r * H + H, hn + s);
      if (cn != nullptr) std::copy(cell + s, cell + s + H, cn + s);
    }
  });
}

template <class T>
void lstm_layer_inference(const Packing& packing, const LstmLayerParams<T>& p, const T* x, Nullable<const T> h0,
                          Nullable<const T> c0, T* y, Nullable<T> hn, Nullable<T> cn, T* workspace, Team* team,
                          float* packed) {
  if (p.proj > 0)  // the training pass into a cache in the workspace, which inference then drops
    return lstm_layer_forward<T>(packing, p, x, h0, c0, y, hn, cn,
                                 lstm_cache_view(workspace, packing.rows(), p.hidden, p.proj), team, packed);
  if (packing.batch() >= kSequencesPerMember * (team != nullptr ? team->size() : 1))
    return inference_by_sequences<T>(packing, p, x, h0, c0, y, hn, cn, workspace, team, packed);
  // Fewer sequences (sampling's one): members split the hidden units, as in training, with a barrier per
  // step; the input projection runs over chunks of steps.
  const int H = p.hidden, G = 4 * H, I = p.input, B = packing.batch();
  const int64_t chunk = inference_chunk_rows(packing.rows(), B);
  T* gates = workspace;         // chunk x 4H: pre-activations of the steps in the current chunk
  T* cell = gates + chunk * G;  // B x H: each sequence's c, updated in place; a finished one keeps its last
  parallel(team, [&](int m, int members) {
    const auto [j0, j1] = int_share(H, members, m, kLanes);
    float* mine = member_packed(packed, I, H, 0, members, m);
    float* in_w = input_packed(packed, I, H, 0, members);
    if constexpr (std::is_same_v<T, float>) {
      if (mine != nullptr) {
        pack_gate_blocks(p.w_hh, H, H, j0, j1, mine);
        pack_input_weights(p.w_ih, G, I, true, in_w, m, members);
        sync(team);
      }
    }
    for (int b = 0; b < B; ++b) {
      T* c = cell + static_cast<int64_t>(b) * H;
      if (c0 != nullptr)
        std::copy(c0 + static_cast<int64_t>(b) * H + j0, c0 + static_cast<int64_t>(b) * H + j1, c + j0);
      else
        std::fill(c + j0, c + j1, T(0));
    }
    for (int t0 = 0; t0 < packing.steps();) {
      // Steps [t0, t1): as many as fit in the chunk (always at least one, since chunk >= B).
      int t1 = t0 + 1;
      while (t1 < packing.steps() && packing.step_offset[t1 + 1] - packing.step_offset[t0] <= chunk) ++t1;
      const int64_t base = packing.step_offset[t0];
      input_projection<T>(blas_dim(packing.step_offset[t1] - base), H, I, x + base * I, p.w_ih, in_w, gates, m,
                          members);
      sync(team);
      for (int t = t0; t < t1; ++t) {
        const int bt = packing.batch_sizes[t];
        const int64_t off = packing.step_offset[t];
        T* g = gates + (off - base) * G;
        const T* h_prev = t > 0 ? y + packing.step_offset[t - 1] * H : h0;
        lstm_step<T>(bt, H, j0, j1, H, h_prev, p.w_hh, mine, g, p.b_ih, p.b_hh, nullptr, cell, y + off * H, false);
        sync(team);
      }
      t0 = t1;
    }
    for (int b = 0; b < B; ++b) {
      const int64_t r = packing.row(packing.lengths[b] - 1, b), s = static_cast<int64_t>(b) * H;
      if (hn != nullptr) std::copy(y + r * H + j0, y + r * H + j1, hn + s + j0);
      if (cn != nullptr) std::copy(cell + s + j0, cell + s + j1, cn + s + j0);
    }
  });
}

// Members own hidden units as in the forward pass: a step's gate gradients for those units, then (after the
// one barrier that completes dG_t) the same units' columns of dh_{t-1} = dG_t W_hh, which only their owner
// reads next. The weight gradients are split by output rows, dx by input rows.
template <class T>
void lstm_layer_backward(const Packing& packing, const LstmLayerParams<T>& p, const T* x, Nullable<const T> /*h0*/,
                         Nullable<const T> c0, LstmLayerCache<T> cache, Nullable<const T> dy, Nullable<const T> dhn,
                         Nullable<const T> dcn, Nullable<T> dx, Nullable<T> dh0, Nullable<T> dc0,
                         LstmLayerGrads<T> grads, T* workspace, Team* team, float* packed) {
  if (p.proj > 0)
    return lstm_proj_backward<T>(packing, p, x, c0, cache, dy, dhn, dcn, dx, dh0, dc0, grads, workspace, team, packed);
  const int H = p.hidden, G = 4 * H, I = p.input, B = packing.batch();
  const int rows = blas_dim(packing.rows());
  const size_t state = static_cast<size_t>(B) * H;
  T* dgates = cache.gates;  // rows x 4H: each step's activated gates become the pre-activation gradients
  T* dh = workspace;
  T* dc = dh + state;
  T* bias_sums = dc + state;  // 4H
  parallel(team, [&](int m, int members) {
    const auto [j0, j1] = int_share(H, members, m, kLanes);
    float* mine = member_packed(packed, I, H, 0, members, m);
    float* in_w = dx != nullptr ? input_packed(packed, I, H, 0, members) : nullptr;
    if constexpr (std::is_same_v<T, float>) {
      if (mine != nullptr) pack_b(p.w_hh + j0, H, 1, G, j1 - j0, mine);
      if (in_w != nullptr) pack_input_weights(p.w_ih, G, I, false, in_w, m, members);  // read after the loop's barriers
    }
    // A sequence not yet reached (going backward) keeps dhn/dcn in dh/dc until its last step comes up.
    for (int b = 0; b < B; ++b) {
      const int64_t s = static_cast<int64_t>(b) * H;
      if (dhn != nullptr)
        std::copy(dhn + s + j0, dhn + s + j1, dh + s + j0);
      else
        std::fill(dh + s + j0, dh + s + j1, T(0));
      if (dcn != nullptr)
        std::copy(dcn + s + j0, dcn + s + j1, dc + s + j0);
      else
        std::fill(dc + s + j0, dc + s + j1, T(0));
    }
    clear_bias_sums(H, j0, j1, bias_sums);
    for (int t = packing.steps() - 1; t >= 0; --t) {
      const int bt = packing.batch_sizes[t];
      const int64_t off = packing.step_offset[t];
      const T* c_prev = t > 0 ? cache.cell + packing.step_offset[t - 1] * H : c0;
      T* dg_t = dgates + off * G;
      cell_backward(bt, H, j0, j1, dg_t, cache.cell + off * H, c_prev, dh, dy != nullptr ? dy + off * H : nullptr, dc,
                    bias_sums);
      sync(team);
      // dh_{t-1} of the active sequences; at t = 0 it is dh0, skipped when not wanted.
      if (t > 0 || dh0 != nullptr)
        recurrent_dh<T>(bt, j0, j1, G, dg_t, p.w_hh, H, mine, dh);
    }
    for (int b = 0; b < B; ++b) {
      const int64_t s = static_cast<int64_t>(b) * H;
      if (dh0 != nullptr) std::copy(dh + s + j0, dh + s + j1, dh0 + s + j0);
      if (dc0 != nullptr) std::copy(dc + s + j0, dc + s + j1, dc0 + s + j0);
    }
    // The loop's last barrier completed dG: weight gradients by output rows, dx by input rows.
    const auto [g0, g1] = int_share(G, members, m);
    const size_t scratch = recurrent_packed_stride(I, H, 0, members);
    input_and_recurrent_gradients<T>(g0, g1, rows, dgates, G, x, I, cache.h_prev, H, grads, mine, scratch);
    add_bias_sums(H, j0, j1, bias_sums, grads.b_ih, grads.b_hh);
    if (dx != nullptr) input_gradient<T>(rows, G, I, dgates, p.w_ih, in_w, dx, m, members);
  });
}

template <class T>
void embedding_forward(const int32_t* ids, int64_t rows, const T* table, int dim, T* out, Team* team) {
  parallel(team, [&](int m, int members) {
    const auto [r0, r1] = share(rows, members, m);
    for (int64_t r = r0; r < r1; ++r) std::copy_n(table + static_cast<int64_t>(ids[r]) * dim, dim, out + r * dim);
  });
}

template <class T>
void embedding_backward(const int32_t* ids, int64_t rows, const T* dout, int dim, T* dtable, Team* team) {
  // Split by columns: repeated ids would make rows collide.
  parallel(team, [&](int m, int members) {
    const auto [k0, k1] = int_share(dim, members, m);
    for (int64_t r = 0; r < rows; ++r) {
      T* dst = dtable + static_cast<int64_t>(ids[r]) * dim;
      const T* src = dout + r * dim;
      for (int k = k0; k < k1; ++k) dst[k] += src[k];
    }
  });
}

template <class T>
void embedding_backward_rows(const int32_t* order, const int32_t* starts, const int32_t* slots, int64_t k,
                             int64_t fresh_from, const T* dout, int dim, T* rows, Team* team) {
  // Each compact row is summed by one member, whole: the slots are distinct.
  parallel(team, [&](int m, int members) {
    const auto [j0, j1] = share(k, members, m);
    for (int64_t j = j0; j < j1; ++j) {
      T* dst = rows + static_cast<int64_t>(slots[j]) * dim;
      if (slots[j] >= fresh_from) std::fill_n(dst, dim, T(0));
      for (int32_t i = starts[j]; i < starts[j + 1]; ++i) {
        const T* src = dout + static_cast<int64_t>(order[i]) * dim;
        for (int c = 0; c < dim; ++c) dst[c] += src[c];
      }
    }
  });
}

template <class T>
void linear_forward(const T* x, int64_t rows, int in, const T* w, const T* b, int out, T* y, Team* team) {
  blas_dim(rows);
  parallel(team, [&](int m, int members) {
    const auto [r0, r1] = int_share(rows, members, m);
    gemm<T>(false, true, r1 - r0, out, in, T(1), x + int64_t{r0} * in, in, w, in, T(0), y + int64_t{r0} * out, out);
    if (b != nullptr)
      for (int64_t r = r0; r < r1; ++r)
        for (int k = 0; k < out; ++k) y[r * out + k] += b[k];
  });
}

template <class T>
void linear_backward(const T* x, int64_t rows, int in, const T* w, int out, const T* dy, Nullable<T> dx, T* dw,
                     T* db, Team* team) {
  const int n = blas_dim(rows);
  parallel(team, [&](int m, int members) {
    if (dx != nullptr) {
      const auto [r0, r1] = int_share(n, members, m);
      gemm<T>(false, false, r1 - r0, in, out, T(1), dy + int64_t{r0} * out, out, w, in, T(0), dx + int64_t{r0} * in,
              in);
    }
    const auto [o0, o1] = int_share(out, members, m);
    gemm<T>(true, false, o1 - o0, in, n, T(1), dy + o0, out, x, in, T(1), dw + int64_t{o0} * in, in);
    if (db != nullptr) add_colsum<T>(dy, rows, out, o0, o1, db);
  });
}

template <class T>
double cross_entropy(const T* logits, int64_t rows, int vocab, const int32_t* targets, Nullable<T> dlogits,
                     std::type_identity_t<T> grad_scale, Team* team) {
  for (int64_t r = 0; r < rows; ++r)
    if (targets[r] < 0 || targets[r] >= vocab)
      throw Error(cat("cross_entropy: target ", targets[r], " of row ", r, " is outside the vocabulary of ", vocab));
  // Per-member partial sums, added in member order so that the result does not depend on timing.
  double part[Team::kMaxSize] = {};
  parallel(team, [&](int m, int members) {
    const auto [r0, r1] = share(rows, members, m);
    if constexpr (std::is_same_v<T, float>) {
      part[m] = cross_entropy_float(logits + r0 * vocab, r1 - r0, vocab, targets + r0,
                                    dlogits != nullptr ? dlogits + r0 * vocab : nullptr, grad_scale);
    } else {
      for (int64_t r = r0; r < r1; ++r) {
        const int32_t target = targets[r];
        const T* l = logits + r * vocab;
        // log(sum exp) with the row max subtracted so that no exp overflows; summed in double.
        const double max = *std::max_element(l, l + vocab);
        double sum = 0;
        for (int k = 0; k < vocab; ++k) sum += std::exp(static_cast<double>(l[k]) - max);
        const double lse = max + std::log(sum);
        part[m] += lse - static_cast<double>(l[target]);
        if (dlogits != nullptr) {
          // Reads l[k] before writing d[k], so d may be l.
          T* d = dlogits + r * vocab;
          for (int k = 0; k < vocab; ++k) {
            const double softmax = std::exp(static_cast<double>(l[k]) - lse);
            d[k] = static_cast<T>((softmax - (k == target ? 1.0 : 0.0)) * static_cast<double>(grad_scale));
          }
        }
      }
    }
  });
  double total = 0;
  for (double v : part) total += v;
  return total;
}

template <class T>
void pool_forward(const T* y, const Packing& packing, int dim, int directions, Pool pool, T* out, int32_t* argmax) {
  const int half = dim / directions;
  for (int b = 0; b < packing.batch(); ++b) {
    const int L = packing.lengths[b];
    T* o = out + int64_t{b} * dim;
    switch (pool) {
      case Pool::last:
        for (int k = 0; k < dim; ++k) o[k] = y[packing.row(k < half ? L - 1 : 0, b) * dim + k];
        break;
      case Pool::mean:
        std::fill_n(o, dim, T(0));
        for (int t = 0; t < L; ++t)
          for (int k = 0; k < dim; ++k) o[k] += y[packing.row(t, b) * dim + k];
        for (int k = 0; k < dim; ++k) o[k] /= static_cast<T>(L);
        break;
      case Pool::max:
        for (int k = 0; k < dim; ++k) {
          int32_t best = 0;
          for (int t = 1; t < L; ++t)
            if (y[packing.row(t, b) * dim + k] > y[packing.row(best, b) * dim + k]) best = t;
          o[k] = y[packing.row(best, b) * dim + k];
          argmax[int64_t{b} * dim + k] = best;
        }
        break;
    }
  }
}

template <class T>
void pool_backward(const T* dout, const Packing& packing, int dim, int directions, Pool pool, const int32_t* argmax,
                   T* dy) {
  const int half = dim / directions;
  std::fill_n(dy, packing.rows() * dim, T(0));
  for (int b = 0; b < packing.batch(); ++b) {
    const int L = packing.lengths[b];
    const T* d = dout + int64_t{b} * dim;
    for (int k = 0; k < dim; ++k) {
      switch (pool) {
        case Pool::last: dy[packing.row(k < half ? L - 1 : 0, b) * dim + k] = d[k]; break;
        case Pool::mean:
          for (int t = 0; t < L; ++t) dy[packing.row(t, b) * dim + k] = d[k] / static_cast<T>(L);
          break;
        case Pool::max: dy[packing.row(argmax[int64_t{b} * dim + k], b) * dim + k] = d[k]; break;
      }
    }
  }
}

template <class T>
void apply_mask(const T* x, const T* mask, int64_t n, T* y) {
  for (int64_t e = 0; e < n; ++e) y[e] = x[e] * mask[e];
}

#define RNN_DIST_INSTANTIATE(T)                                                                                  \
  template void gemm<T>(bool, bool, int, int, int, T, const T*, int, const T*, int, T, T*, int);                 \
  template LstmLayerCache<T> lstm_cache_view<T>(T*, int64_t, int, int);                                          \
  template void lstm_layer_forward<T>(const Packing&, const LstmLayerParams<T>&, const T*, const T*, const T*, T*, \
                                      T*, T*, LstmLayerCache<T>, Team*, float*);                                 \
  template void lstm_layer_inference<T>(const Packing&, const LstmLayerParams<T>&, const T*, const T*, const T*,   \
                                        T*, T*, T*, T*, Team*, float*);                                           \
  template void lstm_layer_backward<T>(const Packing&, const LstmLayerParams<T>&, const T*, const T*, const T*,    \
                                       LstmLayerCache<T>, const T*, const T*, const T*, T*, T*, T*,              \
                                       LstmLayerGrads<T>, T*, Team*, float*);                                    \
  template void embedding_forward<T>(const int32_t*, int64_t, const T*, int, T*, Team*);                         \
  template void embedding_backward<T>(const int32_t*, int64_t, const T*, int, T*, Team*);                        \
  template void embedding_backward_rows<T>(const int32_t*, const int32_t*, const int32_t*, int64_t, int64_t,      \
                                           const T*, int, T*, Team*);                                            \
  template void linear_forward<T>(const T*, int64_t, int, const T*, const T*, int, T*, Team*);                   \
  template void linear_backward<T>(const T*, int64_t, int, const T*, int, const T*, T*, T*, T*, Team*);          \
  template double cross_entropy<T>(const T*, int64_t, int, const int32_t*, T*, T, Team*);                        \
  template void pool_forward<T>(const T*, const Packing&, int, int, Pool, T*, int32_t*);                         \
  template void pool_backward<T>(const T*, const Packing&, int, int, Pool, const int32_t*, T*);                   \
  template void apply_mask<T>(const T*, const T*, int64_t, T*);

RNN_DIST_INSTANTIATE(float)
RNN_DIST_INSTANTIATE(double)

#undef RNN_DIST_INSTANTIATE

}  // namespace rnn_dist::cpu

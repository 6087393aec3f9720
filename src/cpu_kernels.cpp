// CPU reference kernels (see cpu_kernels.h), explicitly instantiated for float and double.
#include "rnn_dist/cpu_kernels.h"

#include <cblas.h>

#include <algorithm>
#include <climits>
#include <cmath>
#include <cstring>
#include <type_traits>

#include "rnn_dist/error.h"

namespace rnn_dist::cpu {

namespace {

// BLAS dimensions are int; a row count beyond that is a caller error, not something to wrap silently.
int blas_dim(int64_t n) {
  if (n < 0 || n > INT_MAX) throw Error(cat("matrix dimension ", n, " is outside the range BLAS accepts"));
  return static_cast<int>(n);
}

template <class T>
T sigmoid(T x) {
  return T(1) / (T(1) + std::exp(-x));
}

// Adds the column sums of m (rows x cols) to acc.
template <class T>
void add_colsum(const T* m, int64_t rows, int cols, T* acc) {
  for (int64_t r = 0; r < rows; ++r) {
    const T* row = m + r * cols;
    for (int k = 0; k < cols; ++k) acc[k] += row[k];
  }
}

}  // namespace

Packing Packing::from_lengths(std::span<const int> lengths) {
  if (lengths.empty()) throw Error("a packed batch needs at least one sequence");
  for (size_t b = 0; b < lengths.size(); ++b) {
    if (lengths[b] < 1) throw Error(cat("sequence ", b, " of the batch has length ", lengths[b], " (must be >= 1)"));
    if (b > 0 && lengths[b] > lengths[b - 1])
      throw Error(cat("batch lengths must be sorted longest first, but sequence ", b, " has length ", lengths[b],
                      " after ", lengths[b - 1]));
  }
  Packing p;
  p.lengths.assign(lengths.begin(), lengths.end());
  const int steps = lengths[0];
  p.batch_sizes.resize(steps);
  p.step_offset.resize(steps + 1);
  int active = p.batch();
  p.step_offset[0] = 0;
  for (int t = 0; t < steps; ++t) {
    while (lengths[active - 1] <= t) --active;  // lengths[0] > t, so this stops at active >= 1
    p.batch_sizes[t] = active;
    p.step_offset[t + 1] = p.step_offset[t] + active;
  }
  return p;
}

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

size_t lstm_cache_elems(int64_t rows, int hidden) { return static_cast<size_t>(rows) * 6 * hidden; }

template <class T>
LstmLayerCache<T> lstm_cache_view(T* base, int64_t rows, int hidden) {
  T* gates = base;
  T* cell = gates + rows * 4 * hidden;
  T* h_prev = cell + rows * hidden;
  return {gates, cell, h_prev};
}

size_t lstm_backward_workspace_elems(int64_t rows, int batch, int hidden) {
  // dG (rows x 4H), then the carried dh and dc (B x H each).
  return static_cast<size_t>(rows) * 4 * hidden + static_cast<size_t>(batch) * 2 * hidden;
}

template <class T>
void lstm_layer_forward(const Packing& packing, const LstmLayerParams<T>& p, const T* x, Nullable<const T> h0,
                        Nullable<const T> c0, T* y, Nullable<T> hn, Nullable<T> cn, LstmLayerCache<T> cache) {
  const int H = p.hidden, G = 4 * H, I = p.input;
  const int rows = blas_dim(packing.rows());

  // Input projection of every step at once; the biases are added in the fused loop.
  gemm<T>(false, true, rows, G, I, T(1), x, I, p.w_ih, I, T(0), cache.gates, G);

  for (int t = 0; t < packing.steps(); ++t) {
    const int bt = packing.batch_sizes[t];
    const int64_t off = packing.step_offset[t];
    // h_{t-1} and c_{t-1} of the active sequences: a prefix of the previous step's rows (or h0, c0).
    T* h_prev = cache.h_prev + off * H;
    const T* c_prev = t > 0 ? cache.cell + packing.step_offset[t - 1] * H : c0;
    if (t > 0)
      std::copy_n(y + packing.step_offset[t - 1] * H, static_cast<size_t>(bt) * H, h_prev);
    else if (h0 != nullptr)
      std::copy_n(h0, static_cast<size_t>(bt) * H, h_prev);
    else
      std::fill_n(h_prev, static_cast<size_t>(bt) * H, T(0));

    T* gates = cache.gates + off * G;
    // A zero h0 contributes nothing.
    if (t > 0 || h0 != nullptr) gemm<T>(false, true, bt, G, H, T(1), h_prev, H, p.w_hh, H, T(1), gates, G);

    T* cell = cache.cell + off * H;
    T* h = y + off * H;
    for (int b = 0; b < bt; ++b) {
      T* gi = gates + static_cast<int64_t>(b) * G;
      T* gf = gi + H;
      T* gg = gf + H;
      T* go = gg + H;
      for (int j = 0; j < H; ++j) {
        const T i = sigmoid(gi[j] + p.b_ih[j] + p.b_hh[j]);
        const T f = sigmoid(gf[j] + p.b_ih[H + j] + p.b_hh[H + j]);
        const T g = std::tanh(gg[j] + p.b_ih[2 * H + j] + p.b_hh[2 * H + j]);
        const T o = sigmoid(go[j] + p.b_ih[3 * H + j] + p.b_hh[3 * H + j]);
        const T cp = c_prev != nullptr ? c_prev[b * H + j] : T(0);
        const T c = f * cp + i * g;
        gi[j] = i;
        gf[j] = f;
        gg[j] = g;
        go[j] = o;
        cell[b * H + j] = c;
        h[b * H + j] = o * std::tanh(c);
      }
    }
  }

  // Each sequence's final state sits at the row of its own last step.
  for (int b = 0; b < packing.batch(); ++b) {
    const int64_t r = packing.row(packing.lengths[b] - 1, b);
    if (hn != nullptr) std::copy_n(y + r * H, H, hn + static_cast<int64_t>(b) * H);
    if (cn != nullptr) std::copy_n(cache.cell + r * H, H, cn + static_cast<int64_t>(b) * H);
  }
}

template <class T>
void lstm_layer_backward(const Packing& packing, const LstmLayerParams<T>& p, const T* x, Nullable<const T> /*h0*/,
                         Nullable<const T> c0, LstmLayerCache<T> cache, Nullable<const T> dy, Nullable<const T> dhn,
                         Nullable<const T> dcn, Nullable<T> dx, Nullable<T> dh0, Nullable<T> dc0,
                         LstmLayerGrads<T> grads, T* workspace) {
  const int H = p.hidden, G = 4 * H, I = p.input, B = packing.batch();
  const int rows = blas_dim(packing.rows());
  const size_t state = static_cast<size_t>(B) * H;
  T* dgates = workspace;  // rows x 4H, gradients w.r.t. the gate pre-activations
  T* dh = dgates + static_cast<int64_t>(rows) * G;
  T* dc = dh + state;
  // A sequence not yet reached (going backward) keeps dhn/dcn in dh/dc until its last step comes up.
  if (dhn != nullptr)
    std::copy_n(dhn, state, dh);
  else
    std::fill_n(dh, state, T(0));
  if (dcn != nullptr)
    std::copy_n(dcn, state, dc);
  else
    std::fill_n(dc, state, T(0));

  for (int t = packing.steps() - 1; t >= 0; --t) {
    const int bt = packing.batch_sizes[t];
    const int64_t off = packing.step_offset[t];
    if (dy != nullptr) {
      const T* dyt = dy + off * H;
      for (size_t e = 0; e < static_cast<size_t>(bt) * H; ++e) dh[e] += dyt[e];
    }
    const T* c_prev = t > 0 ? cache.cell + packing.step_offset[t - 1] * H : c0;
    const T* gates = cache.gates + off * G;
    const T* cell = cache.cell + off * H;
    T* dg_t = dgates + off * G;
    for (int b = 0; b < bt; ++b) {
      const T* gi = gates + static_cast<int64_t>(b) * G;
      const T* gf = gi + H;
      const T* gg = gf + H;
      const T* go = gg + H;
      T* di = dg_t + static_cast<int64_t>(b) * G;
      T* df = di + H;
      T* dg = df + H;
      T* dout = dg + H;
      for (int j = 0; j < H; ++j) {
        const T i = gi[j], f = gf[j], g = gg[j], o = go[j];
        const T tc = std::tanh(cell[b * H + j]);
        const T cp = c_prev != nullptr ? c_prev[b * H + j] : T(0);
        const T dhj = dh[b * H + j];
        const T dct = dc[b * H + j] + dhj * o * (T(1) - tc * tc);
        di[j] = dct * g * i * (T(1) - i);
        df[j] = dct * cp * f * (T(1) - f);
        dg[j] = dct * i * (T(1) - g * g);
        dout[j] = dhj * tc * o * (T(1) - o);
        dc[b * H + j] = dct * f;
      }
    }
    // dh_{t-1} of the active sequences; at t = 0 it is dh0, skipped when not wanted.
    if (t > 0 || dh0 != nullptr) gemm<T>(false, false, bt, H, G, T(1), dg_t, G, p.w_hh, H, T(0), dh, H);
  }

  gemm<T>(true, false, G, I, rows, T(1), dgates, G, x, I, T(1), grads.w_ih, I);
  gemm<T>(true, false, G, H, rows, T(1), dgates, G, cache.h_prev, H, T(1), grads.w_hh, H);
  add_colsum(dgates, rows, G, grads.b_ih);
  add_colsum(dgates, rows, G, grads.b_hh);
  if (dx != nullptr) gemm<T>(false, false, rows, I, G, T(1), dgates, G, p.w_ih, I, T(0), dx, I);
  if (dh0 != nullptr) std::copy_n(dh, state, dh0);
  if (dc0 != nullptr) std::copy_n(dc, state, dc0);
}

template <class T>
void embedding_forward(const int32_t* ids, int64_t rows, const T* table, int dim, T* out) {
  for (int64_t r = 0; r < rows; ++r) std::copy_n(table + static_cast<int64_t>(ids[r]) * dim, dim, out + r * dim);
}

template <class T>
void embedding_backward(const int32_t* ids, int64_t rows, const T* dout, int dim, T* dtable) {
  for (int64_t r = 0; r < rows; ++r) {
    T* dst = dtable + static_cast<int64_t>(ids[r]) * dim;
    const T* src = dout + r * dim;
    for (int k = 0; k < dim; ++k) dst[k] += src[k];
  }
}

template <class T>
void linear_forward(const T* x, int64_t rows, int in, const T* w, const T* b, int out, T* y) {
  const int m = blas_dim(rows);
  gemm<T>(false, true, m, out, in, T(1), x, in, w, in, T(0), y, out);
  for (int64_t r = 0; r < rows; ++r)
    for (int k = 0; k < out; ++k) y[r * out + k] += b[k];
}

template <class T>
void linear_backward(const T* x, int64_t rows, int in, const T* w, int out, const T* dy, Nullable<T> dx, T* dw,
                     T* db) {
  const int m = blas_dim(rows);
  if (dx != nullptr) gemm<T>(false, false, m, in, out, T(1), dy, out, w, in, T(0), dx, in);
  gemm<T>(true, false, out, in, m, T(1), dy, out, x, in, T(1), dw, in);
  add_colsum(dy, rows, out, db);
}

template <class T>
double cross_entropy(const T* logits, int64_t rows, int vocab, const int32_t* targets, Nullable<T> dlogits,
                     std::type_identity_t<T> grad_scale) {
  double total = 0;
  for (int64_t r = 0; r < rows; ++r) {
    const int32_t target = targets[r];
    if (target < 0 || target >= vocab)
      throw Error(cat("cross_entropy: target ", target, " of row ", r, " is outside the vocabulary of ", vocab));
    const T* l = logits + r * vocab;
    // log(sum exp) with the row max subtracted so that no exp overflows; summed in double.
    const double max = *std::max_element(l, l + vocab);
    double sum = 0;
    for (int k = 0; k < vocab; ++k) sum += std::exp(static_cast<double>(l[k]) - max);
    const double lse = max + std::log(sum);
    total += lse - static_cast<double>(l[target]);
    if (dlogits != nullptr) {
      // Reads l[k] before writing d[k], so d may be l.
      T* d = dlogits + r * vocab;
      for (int k = 0; k < vocab; ++k) {
        const double softmax = std::exp(static_cast<double>(l[k]) - lse);
        d[k] = static_cast<T>((softmax - (k == target ? 1.0 : 0.0)) * static_cast<double>(grad_scale));
      }
    }
  }
  return total;
}

template <class T>
void apply_mask(const T* x, const T* mask, int64_t n, T* y) {
  for (int64_t e = 0; e < n; ++e) y[e] = x[e] * mask[e];
}

#define RNN_DIST_INSTANTIATE(T)                                                                                  \
  template void gemm<T>(bool, bool, int, int, int, T, const T*, int, const T*, int, T, T*, int);                 \
  template LstmLayerCache<T> lstm_cache_view<T>(T*, int64_t, int);                                               \
  template void lstm_layer_forward<T>(const Packing&, const LstmLayerParams<T>&, const T*, const T*, const T*, T*, \
                                      T*, T*, LstmLayerCache<T>);                                                \
  template void lstm_layer_backward<T>(const Packing&, const LstmLayerParams<T>&, const T*, const T*, const T*,    \
                                       LstmLayerCache<T>, const T*, const T*, const T*, T*, T*, T*,              \
                                       LstmLayerGrads<T>, T*);                                                   \
  template void embedding_forward<T>(const int32_t*, int64_t, const T*, int, T*);                                \
  template void embedding_backward<T>(const int32_t*, int64_t, const T*, int, T*);                               \
  template void linear_forward<T>(const T*, int64_t, int, const T*, const T*, int, T*);                          \
  template void linear_backward<T>(const T*, int64_t, int, const T*, int, const T*, T*, T*, T*);                 \
  template double cross_entropy<T>(const T*, int64_t, int, const int32_t*, T*, T);                               \
  template void apply_mask<T>(const T*, const T*, int64_t, T*);

RNN_DIST_INSTANTIATE(float)
RNN_DIST_INSTANTIATE(double)

#undef RNN_DIST_INSTANTIATE

}  // namespace rnn_dist::cpu

// CPU reference kernels of the model (packed-batch LSTM layer, embedding, linear, cross-entropy, dropout
// mask), templated on the scalar type: float for training, double for finite-difference tests. They are the
// oracle the GPU and multi-rank paths are checked against. All matrices are row-major; every matrix product
// goes through BLAS, except the float LSTM's per-step recurrent ones given packed weights (packed_gemm.h).
//
// Gradient convention: weight and bias gradients are ACCUMULATED (+=) into caller-zeroed buffers; gradients
// with respect to inputs and initial states (dx, dh0, dc0) are OVERWRITTEN.
//
// Threads: every kernel takes an optional Team (nullptr = the calling thread alone) and splits its work over
// the team's members, each calling single-threaded BLAS (or, for the LSTM's per-step recurrent products in
// float, the packed kernel of packed_gemm.h). The LSTM gives each member a range of hidden units
// for the whole time loop, so a time step costs one barrier.
#pragma once

#include <cstddef>
#include <cstdint>
#include <type_traits>

#include "rnn_dist/cpu/team.h"
#include "rnn_dist/nn/packing.h"

namespace rnn_dist::cpu {

// A pointer argument that may be nullptr. It takes no part in deducing T (which comes from the other
// arguments), so that a plain nullptr can be passed without naming T.
template <class T>
using Nullable = std::type_identity_t<T*>;

// C = alpha * op(A) * op(B) + beta * C (row-major; op(A) is m x k, op(B) is k x n), via cblas_sgemm/dgemm.
template <class T>
void gemm(bool trans_a, bool trans_b, int m, int n, int k, std::type_identity_t<T> alpha, const T* a, int lda,
          const T* b, int ldb, std::type_identity_t<T> beta, T* c, int ldc);

// One LSTM layer's weights, gate order i, f, g, o (as PyTorch nn.LSTM): w_ih is 4H x I, w_hh is 4H x R,
// b_ih and b_hh are 4H each. With a projection (proj = P > 0, nn.LSTM(proj_size=P)) the layer's output and
// recurrent state are h_t = W_hr (o_t * tanh(c_t)), P wide (w_hr is P x H); R, the width of h, is P, else H.
template <class T>
struct LstmLayerParams {
  const T* w_ih;
  const T* w_hh;
  const T* b_ih;
  const T* b_hh;
  int input;
  int hidden;
  const T* w_hr = nullptr;
  int proj = 0;
  int out() const { return proj > 0 ? proj : hidden; }  // R
};

// Gradient buffers shaped as LstmLayerParams; the backward pass adds into them.
template <class T>
struct LstmLayerGrads {
  T* w_ih;
  T* w_hh;
  T* b_ih;
  T* b_hh;
  T* w_hr = nullptr;
};

// What one layer's forward pass keeps for its backward pass, in caller-owned memory.
template <class T>
struct LstmLayerCache {
  T* gates;   // rows x 4H: i, f, g, o after their nonlinearity (the backward pass overwrites them)
  T* cell;    // rows x H: c_t
  T* h_prev;  // rows x R: h_{t-1} of each row, so that dW_hh is a single GEMM
  T* m;       // with a projection, rows x H: o_t * tanh(c_t) before it (else null)
};

// Elements of one layer's cache (gates + cell + h_prev, + m with a projection of width proj).
size_t lstm_cache_elems(int64_t rows, int hidden, int proj = 0);
// Carves a cache out of one block of lstm_cache_elems(rows, hidden, proj) elements.
template <class T>
LstmLayerCache<T> lstm_cache_view(T* base, int64_t rows, int hidden, int proj = 0);
// Elements of the workspace lstm_layer_backward needs.
size_t lstm_backward_workspace_elems(int64_t rows, int batch, int hidden, int proj = 0);
// Elements of the workspace lstm_layer_inference needs (bounded whatever the batch's length without a
// projection; with one, a training cache's).
size_t lstm_inference_workspace_elems(int64_t rows, int batch, int hidden, int proj = 0);

// Elements of the weights packed for the products (cpu/packed_gemm.h) of the float kernels below, which
// take them as `packed` (a scratch buffer they fill on every call: null = BLAS, and null for double): each
// member's part of the recurrent weights for the time loop, for a team of `members` (together big enough
// for the whole of W_hh, which inference by sequences packs over them), then the input
// weights (of a layer of `input` inputs, or fewer) for the input projection and dx. After the backward
// time loop each member's part is the scratch of its weight gradients on the packed kernel, and holds at
// least their whole K blocks. One buffer serves every layer of a stack one after another.
size_t lstm_packed_elems(int input, int hidden, int proj, int members);

// How the float layers multiply their weight gradients (dW = dG^T x, K = the batch's rows), given packed
// weights: OpenBLAS's sgemm, or the packed kernel (packed_gemm_tn: 1.3-1.9x OpenBLAS's AVX2 kernels on an
// AVX-512 CPU, 0.8-0.94x its AVX-512 ones; docs/benchmarks.md, session 15). The default comes from the
// host and the environment alone, never from timing, so that a resumed run on the same host multiplies
// as the first did: packed where OpenBLAS's kernels are narrower than the CPU's AVX-512
// (blas_kernels_leave_avx512_unused()) and the packed kernel runs AVX-512, or where it takes K blocks of
// 512 (Zen 4: 1.02-1.12x OpenBLAS's AVX-512 kernels, session 26; Zen 5 measured only against the
// AVX2 kernels its environment selects, session 28), else BLAS. Tests and onednn_lstm set each.
enum class WeightGradients { blas, packed };
WeightGradients weight_gradients();
void set_weight_gradients(WeightGradients how);

// Forward pass of one layer over a packed batch.
// x: rows x input. h0: B x R, c0: B x H initial states, nullptr for zeros. y: rows x R outputs.
// hn (B x R), cn (B x H): final states, each sequence's taken at its own last step (nullptr = not needed).
template <class T>
void lstm_layer_forward(const Packing& packing, const LstmLayerParams<T>& p, const T* x, Nullable<const T> h0,
                        Nullable<const T> c0, T* y, Nullable<T> hn, Nullable<T> cn, LstmLayerCache<T> cache,
                        Team* team = nullptr, float* packed = nullptr);

// Forward pass of one layer that keeps nothing for a backward pass (evaluation, sampling): the same outputs
// as lstm_layer_forward, in less memory and time. Without a projection and with 16 sequences or more per
// team member, each member takes whole sequences through every step (no barrier in the time loop);
// otherwise the members split the hidden units, a barrier per step. workspace:
// lstm_inference_workspace_elems(rows, batch, hidden) elements.
template <class T>
void lstm_layer_inference(const Packing& packing, const LstmLayerParams<T>& p, const T* x, Nullable<const T> h0,
                          Nullable<const T> c0, T* y, Nullable<T> hn, Nullable<T> cn, T* workspace,
                          Team* team = nullptr, float* packed = nullptr);

// Backward pass of one layer, given the forward's inputs and cache. It overwrites cache.gates (with the
// gate gradients), so each forward pass serves one backward pass.
// dy: rows x R (nullptr = 0). dhn (B x R), dcn (B x H): gradients w.r.t. the final states (nullptr = 0).
// dx: rows x input; dh0 (B x R), dc0 (B x H) (each nullptr = not needed; otherwise overwritten).
// h0 is not read (cache.h_prev holds it); it is taken so that both passes get the same inputs.
// workspace: lstm_backward_workspace_elems(rows, batch, hidden) elements.
template <class T>
void lstm_layer_backward(const Packing& packing, const LstmLayerParams<T>& p, const T* x, Nullable<const T> h0,
                         Nullable<const T> c0, LstmLayerCache<T> cache, Nullable<const T> dy, Nullable<const T> dhn,
                         Nullable<const T> dcn, Nullable<T> dx, Nullable<T> dh0, Nullable<T> dc0,
                         LstmLayerGrads<T> grads, T* workspace, Team* team = nullptr, float* packed = nullptr);

// Embedding lookup: out[r] = table[ids[r]] (rows x dim). ids must lie inside the table.
template <class T>
void embedding_forward(const int32_t* ids, int64_t rows, const T* table, int dim, T* out, Team* team = nullptr);
// dtable[ids[r]] += dout[r]; repeated ids accumulate.
template <class T>
void embedding_backward(const int32_t* ids, int64_t rows, const T* dout, int dim, T* dtable, Team* team = nullptr);
// The same sums into compact rows (a row-sparse gradient, nn/sparse_rows.h): for each j < k, row slots[j]
// of `rows` becomes (slots[j] >= fresh_from: 0, else its value) plus dout's rows order[starts[j]] ..
// order[starts[j + 1] - 1], added in that order, as embedding_backward adds a table's row.
template <class T>
void embedding_backward_rows(const int32_t* order, const int32_t* starts, const int32_t* slots, int64_t k,
                             int64_t fresh_from, const T* dout, int dim, T* rows, Team* team = nullptr);

// y = x W^T + b, with x: rows x in, W: out x in, b: out (nullptr: no bias), y: rows x out.
template <class T>
void linear_forward(const T* x, int64_t rows, int in, const T* w, const T* b, int out, T* y, Team* team = nullptr);
// dx = dy W (overwritten; nullptr = skip), dW += dy^T x, db += column sums of dy (nullptr: no bias).
template <class T>
void linear_backward(const T* x, int64_t rows, int in, const T* w, int out, const T* dy, Nullable<T> dx, T* dw,
                     T* db, Team* team = nullptr);

// Log-softmax cross-entropy of each row of logits (rows x vocab) against its target. Returns the SUM of the
// negative log-likelihoods (float: exponentials in float to ~2e-7 relative, sums in double). If dlogits is not nullptr, writes dlogits = (softmax - onehot) * grad_scale, the
// gradient of grad_scale * sum; dlogits may alias logits. Throws rnn_dist::Error for a target outside
// [0, vocab).
template <class T>
double cross_entropy(const T* logits, int64_t rows, int vocab, const int32_t* targets, Nullable<T> dlogits,
                     std::type_identity_t<T> grad_scale, Team* team = nullptr);

// Pools the rows of every sequence of a packed batch (y: rows x dim) into out (batch x dim). With
// directions == 2 the first half of each row is the forward direction and `last` takes it from the
// sequence's last row and the second half from its first row. max records in argmax (batch x dim) the row
// each maximum came from.
template <class T>
void pool_forward(const T* y, const Packing& packing, int dim, int directions, Pool pool, T* out, int32_t* argmax);
// dy (rows x dim, overwritten) = the gradient of y given dout (batch x dim), for the same arguments.
template <class T>
void pool_backward(const T* dout, const Packing& packing, int dim, int directions, Pool pool, const int32_t* argmax,
                   T* dy);

// Dropout with a given mask (entries 0 or 1/(1-p)): y = x * mask, elementwise; y may alias x. The same call
// serves the forward pass and the backward pass.
template <class T>
void apply_mask(const T* x, const T* mask, int64_t n, T* y);

// The float kernels' exp, sigmoid and tanh (branch-free approximations, in the vector clone this CPU
// runs) over n values: for the accuracy tests against double's libm.
enum class Activation { exp, sigmoid, tanh };
void activation_float(Activation a, const float* x, int64_t n, float* y);

}  // namespace rnn_dist::cpu

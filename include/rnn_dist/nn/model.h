// The sequence model: embedding -> multi-layer (optionally bidirectional) LSTM over packed batches ->
// dropout -> linear -> log-softmax cross-entropy, per token for a language model (the next token) or a
// tagger (the token's tag), per sequence after pooling for a classifier. Parameters and gradients each live
// in one flat buffer on the rank's device (so the gradient all-reduce is one call); param_slices() names
// every tensor as PyTorch's state_dict would (the head: out.* for a language model, classifier.* otherwise).
#pragma once

#include <algorithm>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "rnn_dist/nn/backend.h"
#include "rnn_dist/nn/sparse_rows.h"
#include "rnn_dist/nn/tensor.h"
#include "rnn_dist/util/task.h"

namespace rnn_dist {

struct ModelConfig {
  Task task = Task::lm;
  int64_t vocab = 0;
  int embed = 0, hidden = 0, layers = 1;
  float dropout = 0;
  bool bidirectional = false;  // classify and tag only: a language model must not see the tokens it predicts
  int64_t classes = 0;         // classify and tag: labels or tags (the output layer's width)
  Pool pool = Pool::last;      // classify: how each sequence's LSTM outputs become one row
  // lm: the output layer's weight is the embedding matrix (PyTorch's out.weight = emb.weight): one tensor,
  // emb.weight, both uses' gradients summed; needs embed == features().
  bool tie_embeddings = false;
  // The embedding's gradient as the rows the batch touches (sparse_embedding_grad()), not a dense part of
  // grads(); not with tie_embeddings, whose output layer's gradient is dense.
  bool sparse_embedding = false;
  // lm: the adaptive softmax of torch.nn.AdaptiveLogSoftmaxWithLoss(features(), vocab, cutoffs, div_value,
  // head_bias=False) in place of the full one (empty: full). Cluster i (0-based) holds the ids from
  // cutoffs[i] to cutoffs[i + 1] (the vocabulary's end after the last) through a projection of width
  // floor(features() / div_value^(i + 1)); the head scores the first cutoffs[0] ids and one logit per cluster.
  std::vector<int64_t> cutoffs;
  double div_value = 4;

  int proj = 0;  // > 0: the LSTM's h projected to this width (< hidden), as nn.LSTM(proj_size=proj)

  int64_t outputs() const { return task == Task::lm ? vocab : classes; }
  bool adaptive() const { return !cutoffs.empty(); }
  int directions() const { return bidirectional ? 2 : 1; }
  int state_width() const { return proj > 0 ? proj : hidden; }  // of h (c is always hidden wide)
  int features() const { return directions() * state_width(); }  // width of the LSTM's output rows
};

// A language model's output layer in words, as `info` prints it and a resume compares it: "full softmax",
// "full softmax, tied embeddings" or "adaptive softmax (cutoffs 2000,10000, div-value 4)".
std::string head_name(const ModelConfig& config);
// Cutoffs as text, "2000,10000", and back (InputError starting with `what` unless integers; Model checks
// that they increase and lie inside the vocabulary).
std::string cutoffs_text(const std::vector<int64_t>& cutoffs);
std::vector<int64_t> parse_cutoffs(const std::string& text, const std::string& what);

// A packed batch on the host: B sequences sorted longest first, laid out time-major (row of step t,
// sequence b = step_offset[t] + b). A language model's inputs are ids 0..n-2 of each sequence and its
// targets ids 1..n-1; a classifier's and a tagger's inputs are the tokens between <s> and </s>, the
// targets a tagger's tag per input row, and labels a classifier's label per sequence (in batch order).
// Targets or labels are empty in a batch to predict.
struct Batch {
  Packing packing;
  std::vector<int32_t> inputs, targets, labels;
  int64_t tokens() const { return static_cast<int64_t>(inputs.size()); }  // input rows
  // Terms of the loss: labels for a classifier, target rows otherwise.
  int64_t units() const { return static_cast<int64_t>(labels.empty() ? targets.size() : labels.size()); }
};

// Builds a language model's Batch from sequences stored back to back in `tokens` with the given lengths
// (each >= 2, non-increasing), as read from a sequence file.
Batch make_batch(const std::vector<int32_t>& tokens, const std::vector<int64_t>& lengths);
// The batch's sequences in at most `parts` consecutive groups of about equal rows, each its own packed
// Batch (for gradient accumulation: the parts' gradients add up to the batch's).
std::vector<Batch> split_batch(const Batch& batch, int parts);
// Builds a classifier's or tagger's Batch from framed sequences (<s> ... </s>, each with at least one
// token between) stored back to back. `targets` holds a classifier's label per sequence or a tagger's tag
// per token of `tokens` (the framing's ignored), or is empty for a batch to predict.
Batch make_batch(Task task, const std::vector<int32_t>& tokens, const std::vector<int64_t>& lengths,
                 const std::vector<int32_t>& targets);

class Model {
 public:
  // logits_block_elems > 0 replaces the backend's choice of how many logits to compute at once (tests
  // use it to cut a batch into many blocks).
  Model(Backend& backend, const ModelConfig& config, int64_t logits_block_elems = 0);

  const ModelConfig& config() const { return config_; }
  Backend& backend() const { return backend_; }
  Tensor& params() { return params_; }
  // num_params() gradients, in the same layout as params().
  Tensor& grads() { return grads_; }
  // With config().sparse_embedding: the embedding's gradient, the touched rows of emb.weight (at offset 0),
  // which the passes add to in place of grads()' first region; null otherwise. grads() from
  // dense_grad_offset() on holds every other gradient (below it, zeros).
  SparseRows* sparse_embedding_grad() { return sparse_ ? &*sparse_ : nullptr; }
  int64_t dense_grad_offset() const { return sparse_ ? lstm_offset_ : 0; }
  int64_t num_params() const { return params_.numel(); }  // elements of params(), the alignment gaps included
  int64_t parameter_count() const;  // parameters proper: the elements of every named tensor, as PyTorch counts
  // Offsets into params()/grads(), each region 256-byte aligned (kAlignElems); the gaps between them are zero.
  const std::vector<ParamSlice>& param_slices() const { return slices_; }

  // PyTorch's default initialisation of nn.Embedding, nn.LSTM and nn.Linear from a seeded generator.
  void init(uint64_t seed);

  // Sum of the negative log-likelihoods of the batch's targets (or labels). With grad_scale != 0, also
  // accumulates grad_scale * d(sum)/d(params) into grads() (training mode: dropout on, seeded by dropout_seed).
  // h0/c0 ((layers * directions) x B x state_width() and x hidden, device memory of backend(), or null for
  // zeros) set the initial state;
  // hn/cn (device memory, may be null) receive the final state of every sequence. hn/cn may alias h0/c0,
  // as the stream-mode trainer carries its state: the initial state is copied into a workspace first.
  // `ready` (may be null) hears of gradients as they become final (offsets into grads()): the output
  // layer's, each LSTM layer's above the first where the backend computes them per layer, then the first
  // layer's with the embedding's.
  // The loss is read back (on an asynchronous device, one synchronisation per call).
  double forward_backward(const Batch& batch, float grad_scale, uint64_t dropout_seed, const float* h0 = nullptr,
                          const float* c0 = nullptr, float* hn = nullptr, float* cn = nullptr,
                          GradientReady* ready = nullptr);
  // The same pass, its loss sum added to *loss_sum (one double in backend()'s memory) instead of read back:
  // nothing in it waits for the device, so that a training step reads its loss with its gradient norm in
  // one synchronisation (Backend::start_read).
  void forward_backward_into(double* loss_sum, const Batch& batch, float grad_scale, uint64_t dropout_seed,
                             const float* h0 = nullptr, const float* c0 = nullptr, float* hn = nullptr,
                             float* cn = nullptr, GradientReady* ready = nullptr);
  double evaluate(const Batch& batch, const float* h0 = nullptr, const float* c0 = nullptr, float* hn = nullptr,
                  float* cn = nullptr);

  // Log-probabilities of every output (language model and tagger: rows x outputs in packed order;
  // classifier: B x classes in batch order), from zero initial states, in inference mode; the batch's
  // targets are not read. With the adaptive softmax, the full distribution (its log_prob).
  std::vector<float> log_probs(const Batch& batch);

  // Seconds spent in the forward half (embedding, LSTM, output layer and loss) and the backward half of
  // the last forward_backward or evaluate (0 for evaluate), for the benchmark's time split.
  struct Timing {
    double forward = 0, backward = 0;
  };
  const Timing& last_timing() const { return timing_; }

  // Log-probabilities of the next token after feeding `token` to sequences with state (h, c) (host,
  // layers x state_width() and layers x hidden, updated in place); one sequence of a language model, for sampling.
  std::vector<float> step(int32_t token, std::vector<float>& h, std::vector<float>& c);

  // Host copies of the parameters, in flat order.
  std::vector<float> download_params() const;
  void upload_params(const std::vector<float>& host);

 private:
  // One pass over the batch: the loss added to *loss_sum (device memory; with train, also the gradients),
  // or with `scores` the log-probabilities downloaded instead.
  void run(const Batch& batch, bool train, float grad_scale, uint64_t dropout_seed, const float* h0,
           const float* c0, float* hn, float* cn, double* loss_sum, std::vector<float>* scores = nullptr,
           GradientReady* ready = nullptr);
  // The output layer and its loss over `rows` feature rows (device): the loss of `truth` (host) added to
  // *loss_sum; with train, dfeat (rows x features, device) = grad_scale * d(loss)/d(feat), and the
  // output layer's gradients accumulated. Returns the seconds its backward calls took.
  double head_loss(const float* feat, int64_t rows, const std::vector<int32_t>& truth, bool train, float grad_scale,
                 float* dfeat, double* loss_sum);
  // A linear layer (weight at offset w, bias at b, -1: none; in -> out) and its cross-entropy against
  // `targets` (device) over `rows` rows of x, in blocks: the loss added to *loss_sum; with train, dx
  // overwritten and the layer's gradients accumulated. Returns the seconds of its backward calls.
  double linear_loss(const float* x, int64_t rows, int in, int64_t w, int64_t b, int out, const int32_t* targets,
                     bool train, float grad_scale, float* dx, double* loss_sum);
  // The adaptive softmax's head_loss: the head on every row, each cluster on the rows whose targets it holds.
  double adaptive_loss(const float* feat, int64_t rows, const std::vector<int32_t>& truth, bool train,
                     float grad_scale, float* dfeat, double* loss_sum);
  // Normalised log-probabilities of every output for `rows` feature rows (device) into out (host, rows x outputs).
  void head_log_probs(const float* feat, int64_t rows, float* out);
  // An adaptive softmax cluster: ids [begin, end), projection width `hidden`, weights at w0 (hidden x
  // features) and w1 ((end - begin) x hidden).
  struct Cluster {
    int64_t begin = 0, end = 0;
    int hidden = 0;
    int64_t w0 = 0, w1 = 0;
  };
  // run() with the loss read back.
  double read_loss(const Batch& batch, bool train, float grad_scale, uint64_t dropout_seed, const float* h0,
                   const float* c0, float* hn, float* cn, GradientReady* ready);
  float* param(int64_t offset) { return params_.data() + offset; }
  float* grad(int64_t offset) { return grads_.data() + offset; }

  Backend& backend_;
  ModelConfig config_;
  std::unique_ptr<Lstm> lstm_;
  std::vector<ParamSlice> slices_;
  // The output layer: weight out_w_offset_ (out.weight, the embedding when tied, or the adaptive head's
  // weight), bias out_b_offset_ (-1: none); head_offset_ starts its region after the LSTM's.
  int64_t emb_offset_ = 0, lstm_offset_ = 0, head_offset_ = 0, out_w_offset_ = 0, out_b_offset_ = -1;
  int64_t head_outputs_ = 0;  // the output layer's width: outputs(), or the adaptive head's
  std::vector<Cluster> clusters_;
  // Logits computed at once: about logits_block_elems_, in at least min_block_rows_ rows (the backend's
  // block keeps 256, so that huge vocabularies still make efficient GEMMs; a test's may go down to 1).
  int64_t logits_block_elems_ = 0, min_block_rows_ = 1;
  int64_t rows_per_block(int64_t width) const {
    return std::max<int64_t>(min_block_rows_, logits_block_elems_ / width);
  }
  Tensor params_, grads_;
  std::optional<SparseRows> sparse_;
  // Device workspaces, grown to the largest batch seen.
  Buffer ids_, targets_, argmax_, loss_;
  Tensor emb_, emb_drop_, y_, pooled_, feat_drop_, logits_, dfeat_, dy_, dx_, state_in_, state_out_;
  // The adaptive softmax's: gathered feature rows, their projection and the gradients of both.
  Tensor gathered_, proj_, dproj_, dgathered_;
  // Host scratch, grown to the largest batch: the adaptive head's targets then each cluster's row indices
  // and targets within it; each cluster's rows; downloaded logits of the head and of a cluster.
  std::vector<int32_t> routed_;
  std::vector<int64_t> cluster_rows_;
  std::vector<float> host_logits_, host_tail_;
  Timing timing_;
};

}  // namespace rnn_dist

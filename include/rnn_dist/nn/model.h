// The language model: embedding -> multi-layer LSTM over packed batches -> dropout -> linear -> log-softmax
// cross-entropy. Parameters and gradients each live in one flat buffer on the rank's device (so the
// gradient all-reduce is one call); param_slices() names every tensor as PyTorch's state_dict would.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "rnn_dist/nn/backend.h"
#include "rnn_dist/nn/tensor.h"

namespace rnn_dist {

struct ModelConfig {
  int64_t vocab = 0;
  int embed = 0, hidden = 0, layers = 1;
  float dropout = 0;
};

// A packed batch on the host: B sequences sorted longest first, inputs ids 0..n-2 and targets ids 1..n-1
// of each sequence, laid out time-major (row of step t, sequence b = step_offset[t] + b).
struct Batch {
  Packing packing;
  std::vector<int32_t> inputs, targets;
  int64_t tokens() const { return static_cast<int64_t>(targets.size()); }
};

// Builds a Batch from sequences stored back to back in `tokens` with the given lengths (each >= 2,
// non-increasing), as read from a sequence file.
Batch make_batch(const std::vector<int32_t>& tokens, const std::vector<int64_t>& lengths);

class Model {
 public:
  // logits_block_elems > 0 replaces the backend's choice of how many logits to compute at once (tests
  // use it to cut a batch into many blocks).
  Model(Backend& backend, const ModelConfig& config, int64_t logits_block_elems = 0);

  const ModelConfig& config() const { return config_; }
  Backend& backend() const { return backend_; }
  Tensor& params() { return params_; }
  // num_params() gradients followed by kReduceSlots floats in which the trainer puts the step's loss sum
  // and token count, so that one all-reduce over the buffer carries all three.
  Tensor& grads() { return grads_; }
  static constexpr int64_t kReduceSlots = 2;
  int64_t num_params() const { return params_.numel(); }  // elements of params(), the alignment gaps included
  int64_t parameter_count() const;  // parameters proper: the elements of every named tensor, as PyTorch counts
  // Offsets into params()/grads(), each region 256-byte aligned (kAlignElems); the gaps between them are zero.
  const std::vector<ParamSlice>& param_slices() const { return slices_; }

  // PyTorch's default initialisation of nn.Embedding, nn.LSTM and nn.Linear from a seeded generator.
  void init(uint64_t seed);

  // Sum of target-token negative log-likelihoods of the batch. With grad_scale != 0, also accumulates
  // grad_scale * d(sum)/d(params) into grads() (training mode: dropout on, seeded by dropout_seed).
  // h0/c0 (layers x B x hidden, device memory of backend(), or null for zeros) set the initial state;
  // hn/cn (device memory, may be null) receive the final state of every sequence. hn/cn may alias h0/c0,
  // as the stream-mode trainer carries its state: the initial state is copied into a workspace first.
  double forward_backward(const Batch& batch, float grad_scale, uint64_t dropout_seed, const float* h0 = nullptr,
                          const float* c0 = nullptr, float* hn = nullptr, float* cn = nullptr);
  double evaluate(const Batch& batch, const float* h0 = nullptr, const float* c0 = nullptr, float* hn = nullptr,
                  float* cn = nullptr);

  // Seconds spent in the forward half (embedding, LSTM, output layer and loss) and the backward half of
  // the last forward_backward or evaluate (0 for evaluate), for the benchmark's time split.
  struct Timing {
    double forward = 0, backward = 0;
  };
  const Timing& last_timing() const { return timing_; }

  // Log-probabilities of the next token after feeding `token` to sequences with state (h, c) (host,
  // layers x hidden each, updated in place); one sequence, for sampling.
  std::vector<float> step(int32_t token, std::vector<float>& h, std::vector<float>& c);

  // Host copies of the parameters, in flat order.
  std::vector<float> download_params() const;
  void upload_params(const std::vector<float>& host);

 private:
  double run(const Batch& batch, bool train, float grad_scale, uint64_t dropout_seed, const float* h0,
             const float* c0, float* hn, float* cn);
  float* param(int64_t offset) { return params_.data() + offset; }
  float* grad(int64_t offset) { return grads_.data() + offset; }

  Backend& backend_;
  ModelConfig config_;
  std::unique_ptr<Lstm> lstm_;
  std::vector<ParamSlice> slices_;
  int64_t emb_offset_ = 0, lstm_offset_ = 0, out_w_offset_ = 0, out_b_offset_ = 0;
  int64_t logits_block_rows_ = 0;
  Tensor params_, grads_;
  // Device workspaces, grown to the largest batch seen.
  Buffer ids_, targets_;
  Tensor emb_, emb_drop_, y_, y_drop_, logits_, dy_, dx_, state_in_, state_out_;
  Timing timing_;
};

}  // namespace rnn_dist

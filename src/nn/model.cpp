// Model: the forward/backward pass of the language model over one packed batch (see model.h).
#include "rnn_dist/nn/model.h"

#include <algorithm>
#include <chrono>
#include <cmath>

#include "rnn_dist/util/error.h"
#include "rnn_dist/util/random.h"

namespace rnn_dist {
namespace {

// Grows a raw device buffer geometrically so steady-state steps do not allocate.
void ensure(Buffer& b, Backend& backend, size_t bytes) {
  if (b.bytes() >= bytes) return;
  size_t grown = std::max(bytes, b.bytes() + b.bytes() / 2);
  b = Buffer();
  b = Buffer(backend, grown);
}

using Clock = std::chrono::steady_clock;
double seconds_since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

}  // namespace

Batch make_batch(const std::vector<int32_t>& tokens, const std::vector<int64_t>& lengths) {
  std::vector<int> steps(lengths.size());
  for (size_t b = 0; b < lengths.size(); ++b) {
    if (lengths[b] < 2) throw Error(cat("make_batch: sequence ", b, " has length ", lengths[b], " (< 2)"));
    steps[b] = static_cast<int>(lengths[b] - 1);
  }
  Batch batch;
  batch.packing = Packing::from_lengths(steps);
  const int64_t rows = batch.packing.rows();
  batch.inputs.resize(rows);
  batch.targets.resize(rows);
  int64_t start = 0;
  for (size_t b = 0; b < lengths.size(); ++b) {
    for (int t = 0; t < steps[b]; ++t) {
      int64_t r = batch.packing.row(t, static_cast<int>(b));
      batch.inputs[r] = tokens[start + t];
      batch.targets[r] = tokens[start + t + 1];
    }
    start += lengths[b];
  }
  if (start != static_cast<int64_t>(tokens.size()))
    throw Error(cat("make_batch: lengths add up to ", start, " but ", tokens.size(), " tokens were given"));
  return batch;
}

Model::Model(Backend& backend, const ModelConfig& config, int64_t logits_block_elems)
    : backend_(backend), config_(config) {
  if (config.vocab < 1 || config.embed < 1 || config.hidden < 1 || config.layers < 1)
    throw InputError(cat("invalid model shape: vocab ", config.vocab, ", embed ", config.embed, ", hidden ",
                         config.hidden, ", layers ", config.layers));
  // The backend's block keeps at least 256 rows, so that huge vocabularies still make efficient GEMMs.
  logits_block_rows_ = logits_block_elems > 0
                           ? std::max<int64_t>(1, logits_block_elems / config.vocab)
                           : std::max<int64_t>(256, backend.logits_block_elems() / config.vocab);
  const int64_t V = config.vocab, E = config.embed, H = config.hidden;
  lstm_ = backend.make_lstm({config.embed, config.hidden, config.layers, config.dropout});
  // Every region starts 256 bytes aligned (the gaps stay zero; checkpoints store tensors by name).
  emb_offset_ = 0;
  lstm_offset_ = align_elems(V * E);
  out_w_offset_ = align_elems(lstm_offset_ + lstm_->weight_elems());
  out_b_offset_ = align_elems(out_w_offset_ + V * H);
  slices_.push_back({"emb.weight", emb_offset_, {V, E}});
  for (ParamSlice s : lstm_->canonical_params()) {
    s.name = "lstm." + s.name;
    s.offset += lstm_offset_;
    slices_.push_back(s);
  }
  slices_.push_back({"out.weight", out_w_offset_, {V, H}});
  slices_.push_back({"out.bias", out_b_offset_, {V}});
  const int64_t total = out_b_offset_ + V;
  params_ = Tensor(backend, {total});
  grads_ = Tensor(backend, {total + kReduceSlots});
  backend.zero(params_.data(), total);
  backend.zero(grads_.data(), total + kReduceSlots);
  for (Tensor* t : {&emb_, &emb_drop_, &y_, &y_drop_, &logits_, &dy_, &dx_, &state_in_, &state_out_})
    *t = Tensor(backend, {0});
}

void Model::init(uint64_t seed) {
  Rng rng(seed);
  std::vector<float> host(params_.numel(), 0.0f);
  const double k_lstm = 1.0 / std::sqrt(double(config_.hidden));
  for (const ParamSlice& s : slices_) {
    const int64_t n = numel_of(s.shape);
    float* p = host.data() + s.offset;
    if (s.name == "emb.weight") {
      for (int64_t i = 0; i < n; ++i) p[i] = static_cast<float>(rng.normal());
    } else {
      // nn.LSTM: U(-1/sqrt(H), 1/sqrt(H)); nn.Linear(H, V): kaiming_uniform(a=sqrt(5)) for the weight and the
      // bias both reduce to U(-1/sqrt(fan_in), 1/sqrt(fan_in)) with fan_in = H, the same bound.
      for (int64_t i = 0; i < n; ++i) p[i] = static_cast<float>(rng.uniform(-k_lstm, k_lstm));
    }
  }
  upload_params(host);
}

int64_t Model::parameter_count() const {
  int64_t n = 0;
  for (const ParamSlice& s : slices_) n += numel_of(s.shape);
  return n;
}

std::vector<float> Model::download_params() const {
  std::vector<float> host(params_.numel());
  backend_.download(host.data(), params_.data(), host.size() * sizeof(float));
  return host;
}

void Model::upload_params(const std::vector<float>& host) {
  if (static_cast<int64_t>(host.size()) != params_.numel())
    throw Error(cat("upload_params: ", host.size(), " values for ", params_.numel(), " parameters"));
  backend_.upload(params_.data(), host.data(), host.size() * sizeof(float));
}

double Model::forward_backward(const Batch& batch, float grad_scale, uint64_t dropout_seed, const float* h0,
                               const float* c0, float* hn, float* cn) {
  return run(batch, true, grad_scale, dropout_seed, h0, c0, hn, cn);
}

double Model::evaluate(const Batch& batch, const float* h0, const float* c0, float* hn, float* cn) {
  return run(batch, false, 0.0f, 0, h0, c0, hn, cn);
}

double Model::run(const Batch& batch, bool train, float grad_scale, uint64_t dropout_seed, const float* h0,
                  const float* c0, float* hn, float* cn) {
  const int64_t rows = batch.tokens(), V = config_.vocab, E = config_.embed, H = config_.hidden;
  const int64_t state = int64_t{config_.layers} * batch.packing.batch() * H;
  const float p = train ? config_.dropout : 0.0f;
  const uint64_t seed_emb = mix_seed(dropout_seed, 1), seed_lstm = mix_seed(dropout_seed, 2),
                 seed_out = mix_seed(dropout_seed, 3);
  const auto start = Clock::now();

  ensure(ids_, backend_, rows * sizeof(int32_t));
  ensure(targets_, backend_, rows * sizeof(int32_t));
  auto* ids = static_cast<int32_t*>(ids_.data());
  auto* targets = static_cast<int32_t*>(targets_.data());
  backend_.upload(ids, batch.inputs.data(), rows * sizeof(int32_t));
  backend_.upload(targets, batch.targets.data(), rows * sizeof(int32_t));

  emb_.resize({rows, E});
  backend_.embedding_forward(ids, rows, param(emb_offset_), config_.embed, emb_.data());
  const float* x = emb_.data();
  if (p > 0) {
    emb_drop_.resize({rows, E});
    backend_.dropout(emb_.data(), rows * E, p, seed_emb, emb_drop_.data());
    x = emb_drop_.data();
  }

  // Both LSTMs keep h0/c0 for the backward pass (and cuDNN does not promise that hy may alias hx), so
  // the LSTM reads a device copy of the initial state and may write the final one over the caller's.
  state_in_.resize({2 * align_elems(state)});
  float *h0d = nullptr, *c0d = nullptr;
  if (h0) backend_.copy(h0d = state_in_.data(), h0, state * sizeof(float));
  if (c0) backend_.copy(c0d = state_in_.data() + align_elems(state), c0, state * sizeof(float));

  y_.resize({rows, H});
  lstm_->forward(param(lstm_offset_), batch.packing, x, h0d, c0d, y_.data(), hn, cn, train, seed_lstm);
  const float* y = y_.data();
  if (p > 0) {
    y_drop_.resize({rows, H});
    backend_.dropout(y_.data(), rows * H, p, seed_out, y_drop_.data());
    y = y_drop_.data();
  }
  if (train) dy_.resize({rows, H});

  double loss = 0, backward = 0;
  const int64_t chunk = logits_block_rows_;
  for (int64_t r0 = 0; r0 < rows; r0 += chunk) {
    const int64_t n = std::min(chunk, rows - r0);
    logits_.resize({n, V});
    backend_.linear_forward(y + r0 * H, n, config_.hidden, param(out_w_offset_), param(out_b_offset_),
                            static_cast<int>(V), logits_.data());
    loss += backend_.cross_entropy(logits_.data(), n, static_cast<int>(V), targets + r0,
                                   train ? logits_.data() : nullptr, grad_scale);
    if (train) {
      const auto b0 = Clock::now();
      backend_.linear_backward(y + r0 * H, n, config_.hidden, param(out_w_offset_), static_cast<int>(V),
                               logits_.data(), dy_.data() + r0 * H, grad(out_w_offset_), grad(out_b_offset_));
      backward += seconds_since(b0);
    }
  }
  timing_.forward = seconds_since(start) - backward;

  if (train) {
    const auto b0 = Clock::now();
    if (p > 0) backend_.dropout(dy_.data(), rows * H, p, seed_out, dy_.data());
    dx_.resize({rows, E});
    lstm_->backward(param(lstm_offset_), dy_.data(), nullptr, nullptr, dx_.data(), nullptr, nullptr,
                    grad(lstm_offset_));
    if (p > 0) backend_.dropout(dx_.data(), rows * E, p, seed_emb, dx_.data());
    backend_.embedding_backward(ids, rows, dx_.data(), config_.embed, grad(emb_offset_));
    backward += seconds_since(b0);
  }
  timing_.backward = backward;
  return loss;
}

std::vector<float> Model::step(int32_t token, std::vector<float>& h, std::vector<float>& c) {
  const int64_t V = config_.vocab, E = config_.embed, H = config_.hidden;
  const int64_t state = int64_t{config_.layers} * H;
  if (static_cast<int64_t>(h.size()) != state || static_cast<int64_t>(c.size()) != state)
    throw Error("Model::step: state has the wrong size");
  static const Packing one = Packing::from_lengths(std::vector<int>{1});
  ensure(ids_, backend_, sizeof(int32_t));
  backend_.upload(ids_.data(), &token, sizeof(int32_t));
  emb_.resize({1, E});
  backend_.embedding_forward(static_cast<int32_t*>(ids_.data()), 1, param(emb_offset_), config_.embed, emb_.data());
  const int64_t c_at = align_elems(state);
  state_in_.resize({2 * c_at});
  state_out_.resize({2 * c_at});
  backend_.upload(state_in_.data(), h.data(), state * sizeof(float));
  backend_.upload(state_in_.data() + c_at, c.data(), state * sizeof(float));
  y_.resize({1, H});
  lstm_->forward(param(lstm_offset_), one, emb_.data(), state_in_.data(), state_in_.data() + c_at, y_.data(),
                 state_out_.data(), state_out_.data() + c_at, false, 0);
  backend_.download(h.data(), state_out_.data(), state * sizeof(float));
  backend_.download(c.data(), state_out_.data() + c_at, state * sizeof(float));
  logits_.resize({1, V});
  backend_.linear_forward(y_.data(), 1, config_.hidden, param(out_w_offset_), param(out_b_offset_),
                          static_cast<int>(V), logits_.data());
  std::vector<float> out(V);
  backend_.download(out.data(), logits_.data(), V * sizeof(float));
  float mx = *std::max_element(out.begin(), out.end());
  double sum = 0;
  for (float v : out) sum += std::exp(double{v} - mx);
  const float lse = mx + static_cast<float>(std::log(sum));
  for (float& v : out) v -= lse;
  return out;
}

}  // namespace rnn_dist

// Model: the forward/backward pass of the sequence model over one packed batch (see model.h).
#include "rnn_dist/nn/model.h"

#include <algorithm>
#include <charconv>
#include <chrono>
#include <cmath>
#include <sstream>

#include "rnn_dist/util/error.h"
#include "rnn_dist/util/random.h"

namespace rnn_dist {
namespace {

using Clock = std::chrono::steady_clock;
double seconds_since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

// Python's float a // b, as PyTorch sizes the adaptive softmax's clusters (int(in_features // div_value **
// (i + 1))): CPython's float_floor_div, which differs from floor(a / b) where a / b rounds up to an integer
// (650 // 1.3 is 499, floor(650 / 1.3) 500).
double python_floor_div(double a, double b) {
  double mod = std::fmod(a, b);
  double div = (a - mod) / b;
  if (mod != 0 && ((b < 0) != (mod < 0))) div -= 1.0;
  if (div == 0) return std::copysign(0.0, a / b);
  double floordiv = std::floor(div);
  if (div - floordiv > 0.5) floordiv += 1.0;
  return floordiv;
}

// x[0, n) -= log(sum(exp(x))), the sum in double.
void log_softmax(float* x, int64_t n) {
  const float mx = *std::max_element(x, x + n);
  double sum = 0;
  for (int64_t j = 0; j < n; ++j) sum += std::exp(double{x[j]} - mx);
  const float lse = mx + static_cast<float>(std::log(sum));
  for (int64_t j = 0; j < n; ++j) x[j] -= lse;
}

}  // namespace

std::string head_name(const ModelConfig& c) {
  if (!c.adaptive()) return c.tie_embeddings ? "full softmax, tied embeddings" : "full softmax";
  return cat("adaptive softmax (cutoffs ", cutoffs_text(c.cutoffs), ", div-value ", c.div_value, ")");
}

std::string cutoffs_text(const std::vector<int64_t>& cutoffs) {
  std::string text;
  for (int64_t v : cutoffs) text += cat(text.empty() ? "" : ",", v);
  return text;
}

std::vector<int64_t> parse_cutoffs(const std::string& text, const std::string& what) {
  std::vector<int64_t> out;
  std::stringstream in(text);
  for (std::string item; std::getline(in, item, ',');) {
    int64_t v = 0;
    const auto [end, ec] = std::from_chars(item.data(), item.data() + item.size(), v);
    if (item.empty() || ec != std::errc() || end != item.data() + item.size())
      throw InputError(cat(what, ": '", item, "' is not an integer (want C1,C2,..., increasing)"));
    out.push_back(v);
  }
  if (out.empty()) throw InputError(cat(what, ": no cutoff given"));
  if (text.back() == ',') throw InputError(cat(what, ": ends with a comma (want C1,C2,..., increasing)"));
  return out;
}

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

Batch make_batch(Task task, const std::vector<int32_t>& tokens, const std::vector<int64_t>& lengths,
                 const std::vector<int32_t>& targets) {
  if (task == Task::lm) {
    if (!targets.empty()) throw Error("make_batch: a language model's batch takes no targets");
    return make_batch(tokens, lengths);
  }
  const bool classify = task == Task::classify;
  const size_t expected = classify ? lengths.size() : tokens.size();
  if (!targets.empty() && targets.size() != expected)
    throw Error(cat("make_batch: ", targets.size(), classify ? " labels for " : " tags for ", expected,
                    classify ? " sequences" : " tokens"));
  std::vector<int> steps(lengths.size());
  for (size_t b = 0; b < lengths.size(); ++b) {
    if (lengths[b] < 3) throw Error(cat("make_batch: sequence ", b, " has no token between <s> and </s>"));
    steps[b] = static_cast<int>(lengths[b] - 2);
  }
  Batch batch;
  batch.packing = Packing::from_lengths(steps);
  const int64_t rows = batch.packing.rows();
  const bool tags = !classify && !targets.empty();
  batch.inputs.resize(rows);
  if (tags) batch.targets.resize(rows);
  int64_t start = 0;
  for (size_t b = 0; b < lengths.size(); ++b) {
    for (int t = 0; t < steps[b]; ++t) {
      const int64_t r = batch.packing.row(t, static_cast<int>(b));
      batch.inputs[r] = tokens[start + 1 + t];
      if (tags) batch.targets[r] = targets[start + 1 + t];
    }
    start += lengths[b];
  }
  if (start != static_cast<int64_t>(tokens.size()))
    throw Error(cat("make_batch: lengths add up to ", start, " but ", tokens.size(), " tokens were given"));
  if (classify) batch.labels = targets;
  return batch;
}

std::vector<Batch> split_batch(const Batch& batch, int parts) {
  const std::vector<int>& lengths = batch.packing.lengths;
  const int B = batch.packing.batch();
  const int64_t rows = batch.packing.rows();
  const bool targets = !batch.targets.empty(), labels = !batch.labels.empty();
  std::vector<Batch> out;
  int64_t done = 0;
  for (int b0 = 0, p = 0; b0 < B; ++p) {
    // The next group ends where the rows so far reach (p + 1) / parts of the batch's, one sequence at least.
    int b1 = b0 + 1;
    int64_t upto = done + lengths[size_t(b0)];
    while (b1 < B && (upto + lengths[size_t(b1)]) * parts <= rows * (p + 1)) upto += lengths[size_t(b1++)];
    Batch part;
    part.packing = Packing::from_lengths(std::span<const int>(lengths).subspan(size_t(b0), size_t(b1 - b0)));
    part.inputs.resize(size_t(part.packing.rows()));
    if (targets) part.targets.resize(part.inputs.size());
    for (int b = b0; b < b1; ++b)
      for (int t = 0; t < lengths[size_t(b)]; ++t) {
        const int64_t from = batch.packing.row(t, b), to = part.packing.row(t, b - b0);
        part.inputs[size_t(to)] = batch.inputs[size_t(from)];
        if (targets) part.targets[size_t(to)] = batch.targets[size_t(from)];
      }
    if (labels) part.labels.assign(batch.labels.begin() + b0, batch.labels.begin() + b1);
    done = upto;
    b0 = b1;
    out.push_back(std::move(part));
  }
  return out;
}

Model::Model(Backend& backend, const ModelConfig& config, int64_t logits_block_elems)
    : backend_(backend), config_(config) {
  if (config.vocab < 1 || config.embed < 1 || config.hidden < 1 || config.layers < 1)
    throw InputError(cat("invalid model shape: vocab ", config.vocab, ", embed ", config.embed, ", hidden ",
                         config.hidden, ", layers ", config.layers));
  if (config.task == Task::lm && config.bidirectional)
    throw InputError("--bidirectional: a language model would see the tokens it predicts (classify and tag only)");
  if (config.task != Task::lm && config.classes < 1)
    throw InputError(cat("invalid model shape: ", config.classes, " classes for task ", task_name(config.task)));
  const int64_t V = config.vocab, E = config.embed, F = config.features(), O = config.outputs();
  if (config.task != Task::lm && (config.tie_embeddings || config.adaptive()))
    throw InputError(cat(config.tie_embeddings ? "--tie-embeddings" : "--softmax adaptive", ": a ",
                         task_name(config.task), " model's output layer scores its ", config.classes,
                         " classes, not the vocabulary (language models only)"));
  if (config.tie_embeddings && config.adaptive())
    throw InputError("--tie-embeddings with --softmax adaptive: the adaptive head scores clusters as well as "
                     "words, so it cannot be the embedding matrix (use one or the other)");
  if (config.tie_embeddings && config.sparse_embedding)
    throw InputError("--sparse-embedding with --tie-embeddings: the tied output layer's gradient reaches every row "
                     "of the embedding at every step (use one or the other)");
  if (config.tie_embeddings && E != F)
    throw InputError(cat("--tie-embeddings: the embedding is ", E, " wide (--embed) but the output layer reads ", F,
                         config.proj > 0 ? " features (--proj-size)" : " features (--hidden)", ": they must be equal"));
  if (config.proj < 0 || config.proj >= config.hidden)
    throw InputError(cat("--proj-size ", config.proj, ": must be below --hidden ", config.hidden,
                         " (as nn.LSTM's proj_size; 0: no projection)"));
  lstm_ = backend.make_lstm({config.embed, config.hidden, config.layers, config.dropout, config.bidirectional, config.proj});
  // Every region starts 256 bytes aligned (the gaps stay zero; checkpoints store tensors by name).
  emb_offset_ = 0;
  lstm_offset_ = align_elems(V * E);
  head_offset_ = align_elems(lstm_offset_ + lstm_->weight_elems());
  slices_.push_back({"emb.weight", emb_offset_, {V, E}});
  for (ParamSlice s : lstm_->canonical_params()) {
    s.name = "lstm." + s.name;
    s.offset += lstm_offset_;
    slices_.push_back(s);
  }
  // The head's names: PyTorch word-language-model's decoder ("out"), or a classifier's; the adaptive
  // softmax's as its module's state_dict under out.
  int64_t end = head_offset_;
  auto add = [&](const std::string& name, std::vector<int64_t> shape) {
    const int64_t at = align_elems(end);
    end = at + numel_of(shape);
    slices_.push_back({name, at, std::move(shape)});
    return at;
  };
  if (config.adaptive()) {
    const std::vector<int64_t>& c = config.cutoffs;
    for (size_t i = 0; i < c.size(); ++i)
      if (c[i] < 1 || c[i] >= V || (i > 0 && c[i] <= c[i - 1]))
        throw InputError(cat("--cutoffs: ", c[i], " must be above ", i > 0 ? c[i - 1] : 0,
                             " and below the vocabulary size ", V, " (increasing, each cluster nonempty)"));
    if (!(config.div_value > 0)) throw InputError(cat("--div-value ", config.div_value, ": must be positive"));
    head_outputs_ = c[0] + static_cast<int64_t>(c.size());
    out_w_offset_ = add("out.head.weight", {head_outputs_, F});
    for (size_t i = 0; i < c.size(); ++i) {
      Cluster k;
      k.begin = c[i];
      k.end = i + 1 < c.size() ? c[i + 1] : V;
      k.hidden = static_cast<int>(python_floor_div(double(F), std::pow(config.div_value, double(i + 1))));
      if (k.hidden < 1)
        throw InputError(cat("--div-value ", config.div_value, ": cluster ", i, "'s projection would be ", F, " / ",
                             config.div_value, "^", i + 1, " < 1 wide (lower --div-value or use fewer --cutoffs)"));
      const std::string name = cat("out.tail.", i, ".");
      k.w0 = add(name + "0.weight", {k.hidden, F});
      k.w1 = add(name + "1.weight", {k.end - k.begin, k.hidden});
      clusters_.push_back(k);
    }
  } else {
    head_outputs_ = O;
    const std::string head = config.task == Task::lm ? "out" : "classifier";
    out_w_offset_ = config.tie_embeddings ? emb_offset_ : add(head + ".weight", {O, F});
    out_b_offset_ = add(head + ".bias", {O});
  }
  logits_block_elems_ = logits_block_elems > 0 ? logits_block_elems : backend.logits_block_elems();
  min_block_rows_ = logits_block_elems > 0 ? 1 : 256;
  params_ = Tensor(backend, {end});
  grads_ = Tensor(backend, {end});
  backend.zero(params_.data(), end);
  backend.zero(grads_.data(), end);
  loss_ = Buffer(backend, sizeof(double));
  if (config.sparse_embedding) sparse_.emplace(backend, V, config.embed);
  for (Tensor* t : {&emb_, &emb_drop_, &y_, &pooled_, &feat_drop_, &logits_, &dfeat_, &dy_, &dx_, &state_in_,
                    &state_out_, &gathered_, &proj_, &dproj_, &dgathered_})
    *t = Tensor(backend, {0});
}

void Model::init(uint64_t seed) {
  Rng rng(seed);
  std::vector<float> host(params_.numel(), 0.0f);
  const double k_lstm = 1.0 / std::sqrt(double(config_.hidden)), k_out = 1.0 / std::sqrt(double(config_.features()));
  for (const ParamSlice& s : slices_) {
    const int64_t n = numel_of(s.shape);
    float* p = host.data() + s.offset;
    if (s.name == "emb.weight" && !config_.tie_embeddings) {
      for (int64_t i = 0; i < n; ++i) p[i] = static_cast<float>(rng.normal());
    } else {
      // nn.LSTM: U(-1/sqrt(H), 1/sqrt(H)); nn.Linear(in, out), its weight and bias both: kaiming_uniform(a=sqrt(5))
      // reduces to U(-1/sqrt(in), 1/sqrt(in)): in = F (H, or 2H when bidirectional) for the output layer, a
      // tied embedding (the output layer's tensor, as `emb.weight = out.weight` ties it) and the adaptive
      // head, a cluster's projection width for its second matrix.
      const double k = s.offset < head_offset_ && s.offset >= lstm_offset_ ? k_lstm
                       : s.shape.size() == 2                                ? 1.0 / std::sqrt(double(s.shape[1]))
                                                                            : k_out;
      for (int64_t i = 0; i < n; ++i) p[i] = static_cast<float>(rng.uniform(-k, k));
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
                               const float* c0, float* hn, float* cn, GradientReady* ready) {
  return read_loss(batch, true, grad_scale, dropout_seed, h0, c0, hn, cn, ready);
}

void Model::forward_backward_into(double* loss_sum, const Batch& batch, float grad_scale, uint64_t dropout_seed,
                                  const float* h0, const float* c0, float* hn, float* cn, GradientReady* ready) {
  run(batch, true, grad_scale, dropout_seed, h0, c0, hn, cn, loss_sum, nullptr, ready);
}

double Model::evaluate(const Batch& batch, const float* h0, const float* c0, float* hn, float* cn) {
  return read_loss(batch, false, 0.0f, 0, h0, c0, hn, cn, nullptr);
}

double Model::read_loss(const Batch& batch, bool train, float grad_scale, uint64_t dropout_seed, const float* h0,
                        const float* c0, float* hn, float* cn, GradientReady* ready) {
  auto* loss = static_cast<double*>(loss_.data());
  backend_.zero(reinterpret_cast<float*>(loss), sizeof(double) / sizeof(float));  // 0.0 is all zero bits
  run(batch, train, grad_scale, dropout_seed, h0, c0, hn, cn, loss, nullptr, ready);
  double sum = 0;
  backend_.start_read(loss, 1);
  backend_.finish_read(&sum);
  return sum;
}

std::vector<float> Model::log_probs(const Batch& batch) {
  std::vector<float> out;
  run(batch, false, 0.0f, 0, nullptr, nullptr, nullptr, nullptr, nullptr, &out);
  return out;
}

void Model::run(const Batch& batch, bool train, float grad_scale, uint64_t dropout_seed, const float* h0,
                const float* c0, float* hn, float* cn, double* loss_sum, std::vector<float>* scores,
                GradientReady* ready) {
  const bool classify = config_.task == Task::classify;
  const int B = batch.packing.batch(), D = config_.directions();
  const int64_t rows = batch.tokens(), E = config_.embed, F = config_.features(), O = config_.outputs();
  const int64_t state = int64_t{config_.layers} * D * B * config_.state_width(),
                cstate = int64_t{config_.layers} * D * B * config_.hidden;
  // The output layer's rows: one per sequence for a classifier, one per packed row otherwise.
  const int64_t head_rows = classify ? B : rows;
  const std::vector<int32_t>& truth = classify ? batch.labels : batch.targets;
  if (!scores && static_cast<int64_t>(truth.size()) != head_rows)
    throw Error(cat("Model: a batch of ", head_rows, classify ? " sequences has " : " rows has ", truth.size(),
                    classify ? " labels" : " targets"));
  const float p = train ? config_.dropout : 0.0f;
  const uint64_t seed_emb = mix_seed(dropout_seed, 1), seed_lstm = mix_seed(dropout_seed, 2),
                 seed_out = mix_seed(dropout_seed, 3);
  const auto start = Clock::now();

  ensure(ids_, backend_, rows * sizeof(int32_t));
  auto* ids = static_cast<int32_t*>(ids_.data());
  backend_.upload(ids, batch.inputs.data(), rows * sizeof(int32_t));
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
  state_in_.resize({align_elems(state) + cstate});
  float *h0d = nullptr, *c0d = nullptr;
  if (h0) backend_.copy(h0d = state_in_.data(), h0, state * sizeof(float));
  if (c0) backend_.copy(c0d = state_in_.data() + align_elems(state), c0, cstate * sizeof(float));

  y_.resize({rows, F});
  lstm_->forward(param(lstm_offset_), batch.packing, x, h0d, c0d, y_.data(), hn, cn, train, seed_lstm);
  // The output layer reads the LSTM's rows, or a classifier's pooled row per sequence.
  const float* feat = y_.data();
  int32_t* argmax = nullptr;
  if (classify) {
    if (config_.pool == Pool::max) {
      ensure(argmax_, backend_, B * F * sizeof(int32_t));
      argmax = static_cast<int32_t*>(argmax_.data());
    }
    pooled_.resize({B, F});
    backend_.pool_forward(y_.data(), batch.packing, static_cast<int>(F), D, config_.pool, pooled_.data(), argmax);
    feat = pooled_.data();
  }
  if (p > 0) {
    feat_drop_.resize({head_rows, F});
    backend_.dropout(feat, head_rows * F, p, seed_out, feat_drop_.data());
    feat = feat_drop_.data();
  }
  Tensor& dfeat = classify ? dfeat_ : dy_;
  if (train) dfeat.resize({head_rows, F});

  double backward = 0;
  if (scores) {
    scores->resize(head_rows * O);
    head_log_probs(feat, head_rows, scores->data());
  } else {
    backward += head_loss(feat, head_rows, truth, train, grad_scale, dfeat.data(), loss_sum);
  }
  timing_.forward = seconds_since(start) - backward;

  if (train) {
    const auto b0 = Clock::now();
    if (ready) ready->final_from(head_offset_);
    if (p > 0) backend_.dropout(dfeat.data(), head_rows * F, p, seed_out, dfeat.data());
    if (classify) {
      dy_.resize({rows, F});
      backend_.pool_backward(dfeat_.data(), batch.packing, static_cast<int>(F), D, config_.pool, argmax, dy_.data());
    }
    dx_.resize({rows, E});
    // The LSTM's offsets are into its own weights. Its bottom layer's report (offset 0) is left to the
    // embedding's, a moment later: that backward is a scatter of rows, shorter than the latency of one
    // more all-reduce.
    struct Shifted final : GradientReady {
      GradientReady* to;
      int64_t by;
      Shifted(GradientReady* t, int64_t b) : to(t), by(b) {}
      void final_from(int64_t offset) override {
        if (offset > 0) to->final_from(by + offset);
      }
    } lstm_ready(ready, lstm_offset_);
    lstm_->backward(param(lstm_offset_), dy_.data(), nullptr, nullptr, dx_.data(), nullptr, nullptr,
                    grad(lstm_offset_), ready ? &lstm_ready : nullptr);
    if (p > 0) backend_.dropout(dx_.data(), rows * E, p, seed_emb, dx_.data());
    if (sparse_)
      sparse_->add(batch.inputs.data(), rows, dx_.data());
    else
      backend_.embedding_backward(ids, rows, dx_.data(), config_.embed, grad(emb_offset_));
    if (ready) ready->final_from(0);
    backward += seconds_since(b0);
  }
  timing_.backward = backward;
}

double Model::head_loss(const float* feat, int64_t rows, const std::vector<int32_t>& truth, bool train,
                        float grad_scale, float* dfeat, double* loss_sum) {
  if (config_.adaptive()) return adaptive_loss(feat, rows, truth, train, grad_scale, dfeat, loss_sum);
  const int F = static_cast<int>(config_.features()), O = static_cast<int>(head_outputs_);
  ensure(targets_, backend_, rows * sizeof(int32_t));
  auto* targets = static_cast<int32_t*>(targets_.data());
  backend_.upload(targets, truth.data(), rows * sizeof(int32_t));
  return linear_loss(feat, rows, F, out_w_offset_, out_b_offset_, O, targets, train, grad_scale, dfeat, loss_sum);
}

double Model::linear_loss(const float* x, int64_t rows, int in, int64_t w, int64_t b, int out, const int32_t* targets,
                          bool train, float grad_scale, float* dx, double* loss_sum) {
  const float* bias = b >= 0 ? param(b) : nullptr;
  const int64_t block = rows_per_block(out);
  double backward = 0;
  for (int64_t r0 = 0; r0 < rows; r0 += block) {
    const int64_t n = std::min(block, rows - r0);
    logits_.resize({n, out});
    backend_.linear_forward(x + r0 * in, n, in, param(w), bias, out, logits_.data());
    backend_.cross_entropy(logits_.data(), n, out, targets + r0, train ? logits_.data() : nullptr, grad_scale, loss_sum);
    if (train) {
      const auto b0 = Clock::now();
      backend_.linear_backward(x + r0 * in, n, in, param(w), out, logits_.data(), dx + r0 * in, grad(w),
                               b >= 0 ? grad(b) : nullptr);
      backward += seconds_since(b0);
    }
  }
  return backward;
}

double Model::adaptive_loss(const float* feat, int64_t rows, const std::vector<int32_t>& truth, bool train,
                            float grad_scale, float* dfeat, double* loss_sum) {
  // The loss of a target in cluster k is the head's for cluster k's logit plus cluster k's own for the
  // target within it: two cross-entropies, the head's over every row, cluster k's over its rows only.
  // routed_: the head's targets (rows), then per cluster the indices of its rows and their targets within it.
  const int F = static_cast<int>(config_.features()), Hd = static_cast<int>(head_outputs_);
  const int64_t C0 = config_.cutoffs[0], K = static_cast<int64_t>(clusters_.size());
  routed_.resize(size_t(3 * rows));
  cluster_rows_.assign(size_t(K), 0);
  for (int64_t r = 0; r < rows; ++r) {
    const int32_t t = truth[size_t(r)];
    if (t < 0 || t >= config_.vocab)
      throw Error(cat("cross_entropy: target ", t, " of row ", r, " is outside the vocabulary of ", config_.vocab));
    // k: how many cutoffs are <= t, 0 for the shortlist, else cluster k - 1.
    const int64_t k = std::upper_bound(config_.cutoffs.begin(), config_.cutoffs.end(), int64_t{t}) -
                      config_.cutoffs.begin();
    routed_[size_t(r)] = k == 0 ? t : static_cast<int32_t>(C0 + k - 1);
    if (k > 0) ++cluster_rows_[size_t(k - 1)];
  }
  int64_t used = rows;
  for (int64_t k = 0; k < K; ++k) {
    const Cluster& c = clusters_[size_t(k)];
    int32_t* idx = routed_.data() + used;
    int32_t* rel = idx + cluster_rows_[size_t(k)];
    for (int64_t r = 0, m = 0; r < rows; ++r)
      if (const int32_t t = truth[size_t(r)]; t >= c.begin && t < c.end) {
        idx[m] = static_cast<int32_t>(r);
        rel[m++] = static_cast<int32_t>(t - c.begin);
      }
    used += 2 * cluster_rows_[size_t(k)];
  }
  ensure(targets_, backend_, used * sizeof(int32_t));
  auto* routed = static_cast<int32_t*>(targets_.data());
  backend_.upload(routed, routed_.data(), used * sizeof(int32_t));

  double backward = linear_loss(feat, rows, F, out_w_offset_, -1, Hd, routed, train, grad_scale, dfeat, loss_sum);
  used = rows;
  for (int64_t k = 0; k < K; ++k) {
    const Cluster& c = clusters_[size_t(k)];
    const int64_t m = cluster_rows_[size_t(k)];
    const int32_t* idx = routed + used;
    const int32_t* rel = idx + m;
    used += 2 * m;
    const int h = c.hidden, O = static_cast<int>(c.end - c.begin);
    const int64_t block = rows_per_block(O);
    for (int64_t r0 = 0; r0 < m; r0 += block) {
      const int64_t n = std::min(block, m - r0);
      gathered_.resize({n, F});
      proj_.resize({n, h});
      logits_.resize({n, O});
      backend_.embedding_forward(idx + r0, n, feat, F, gathered_.data());  // a gather of the cluster's rows
      backend_.linear_forward(gathered_.data(), n, F, param(c.w0), nullptr, h, proj_.data());
      backend_.linear_forward(proj_.data(), n, h, param(c.w1), nullptr, O, logits_.data());
      backend_.cross_entropy(logits_.data(), n, O, rel + r0, train ? logits_.data() : nullptr, grad_scale, loss_sum);
      if (!train) continue;
      const auto b0 = Clock::now();
      dproj_.resize({n, h});
      dgathered_.resize({n, F});
      backend_.linear_backward(proj_.data(), n, h, param(c.w1), O, logits_.data(), dproj_.data(), grad(c.w1), nullptr);
      backend_.linear_backward(gathered_.data(), n, F, param(c.w0), h, dproj_.data(), dgathered_.data(), grad(c.w0),
                               nullptr);
      backend_.embedding_backward(idx + r0, n, dgathered_.data(), F, dfeat);  // added to the rows' head gradient
      backward += seconds_since(b0);
    }
  }
  return backward;
}

void Model::head_log_probs(const float* feat, int64_t rows, float* out) {
  const int F = static_cast<int>(config_.features());
  const int64_t O = config_.outputs(), block = rows_per_block(O);  // rows x outputs holds every part
  if (!config_.adaptive()) {
    const float* bias = out_b_offset_ >= 0 ? param(out_b_offset_) : nullptr;
    for (int64_t r0 = 0; r0 < rows; r0 += block) {
      const int64_t n = std::min(block, rows - r0);
      logits_.resize({n, O});
      backend_.linear_forward(feat + r0 * F, n, F, param(out_w_offset_), bias, static_cast<int>(O), logits_.data());
      backend_.download(out + r0 * O, logits_.data(), n * O * sizeof(float));
    }
    for (int64_t r = 0; r < rows; ++r) log_softmax(out + r * O, O);
    return;
  }
  // log p(t) = head's log-softmax at t for the shortlist; at cluster k's logit plus cluster k's own
  // log-softmax at t - begin for the ids of cluster k (AdaptiveLogSoftmaxWithLoss.log_prob).
  const int Hd = static_cast<int>(head_outputs_);
  const int64_t C0 = config_.cutoffs[0];
  for (int64_t r0 = 0; r0 < rows; r0 += block) {
    const int64_t n = std::min(block, rows - r0);
    const float* x = feat + r0 * F;
    float* o = out + r0 * O;
    logits_.resize({n, Hd});
    backend_.linear_forward(x, n, F, param(out_w_offset_), nullptr, Hd, logits_.data());
    host_logits_.resize(size_t(n * Hd));
    backend_.download(host_logits_.data(), logits_.data(), n * Hd * sizeof(float));
    for (int64_t r = 0; r < n; ++r) {
      float* head = host_logits_.data() + r * Hd;
      log_softmax(head, Hd);
      std::copy_n(head, C0, o + r * O);
    }
    for (size_t k = 0; k < clusters_.size(); ++k) {
      const Cluster& c = clusters_[k];
      const int64_t width = c.end - c.begin;
      proj_.resize({n, c.hidden});
      logits_.resize({n, width});
      backend_.linear_forward(x, n, F, param(c.w0), nullptr, c.hidden, proj_.data());
      backend_.linear_forward(proj_.data(), n, c.hidden, param(c.w1), nullptr, static_cast<int>(width), logits_.data());
      host_tail_.resize(size_t(n * width));
      backend_.download(host_tail_.data(), logits_.data(), n * width * sizeof(float));
      for (int64_t r = 0; r < n; ++r) {
        float* row = o + r * O + c.begin;
        std::copy_n(host_tail_.data() + r * width, width, row);
        log_softmax(row, width);
        const float cluster = host_logits_[size_t(r * Hd + C0 + int64_t(k))];
        for (int64_t j = 0; j < width; ++j) row[j] += cluster;
      }
    }
  }
}

std::vector<float> Model::step(int32_t token, std::vector<float>& h, std::vector<float>& c) {
  const int64_t V = config_.vocab, E = config_.embed, H = config_.hidden;
  const int64_t state = int64_t{config_.layers} * config_.state_width(), cstate = int64_t{config_.layers} * H;
  if (config_.task != Task::lm) throw Error("Model::step: only a language model samples");
  if (static_cast<int64_t>(h.size()) != state || static_cast<int64_t>(c.size()) != cstate)
    throw Error("Model::step: state has the wrong size");
  static const Packing one = Packing::from_lengths(std::vector<int>{1});
  ensure(ids_, backend_, sizeof(int32_t));
  backend_.upload(ids_.data(), &token, sizeof(int32_t));
  emb_.resize({1, E});
  backend_.embedding_forward(static_cast<int32_t*>(ids_.data()), 1, param(emb_offset_), config_.embed, emb_.data());
  const int64_t c_at = align_elems(state);
  state_in_.resize({c_at + cstate});
  state_out_.resize({c_at + cstate});
  backend_.upload(state_in_.data(), h.data(), state * sizeof(float));
  backend_.upload(state_in_.data() + c_at, c.data(), cstate * sizeof(float));
  y_.resize({1, config_.state_width()});
  lstm_->forward(param(lstm_offset_), one, emb_.data(), state_in_.data(), state_in_.data() + c_at, y_.data(),
                 state_out_.data(), state_out_.data() + c_at, false, 0);
  backend_.download(h.data(), state_out_.data(), state * sizeof(float));
  backend_.download(c.data(), state_out_.data() + c_at, cstate * sizeof(float));
  std::vector<float> out(V);
  head_log_probs(y_.data(), 1, out.data());
  return out;
}

}  // namespace rnn_dist

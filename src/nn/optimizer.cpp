// Optimizer, clipping and learning-rate schedules (see optimizer.h).
#include "rnn_dist/nn/optimizer.h"

#include <algorithm>
#include <cmath>

#include "rnn_dist/nn/sparse_rows.h"
#include "rnn_dist/util/error.h"

namespace rnn_dist {

AdamScalars adam_scalars(float lr, float beta1, float beta2, int64_t step) {
  const double bc1 = 1.0 - std::pow(double{beta1}, double(step));
  const double bc2 = 1.0 - std::pow(double{beta2}, double(step));
  return {static_cast<float>(lr / bc1), static_cast<float>(1.0 / std::sqrt(bc2))};
}

Optimizer::Optimizer(Backend& backend, const OptimizerConfig& config, int64_t n)
    : backend_(backend), config_(config), n_(n) {
  if (config.kind != "sgd" && config.kind != "adam" && config.kind != "adamw")
    throw InputError(cat("--optimizer: unknown optimizer '", config.kind, "' (sgd, adam or adamw)"));
  a_ = Tensor(backend, {n});
  backend.zero(a_.data(), n);
  if (config.kind != "sgd") {
    b_ = Tensor(backend, {n});
    backend.zero(b_.data(), n);
  }
}

void Optimizer::step(float* params, const float* grads, float lr, SparseRows* sparse, int64_t dense_from) {
  ++steps_;
  const auto& c = config_;
  const int64_t d = sparse ? dense_from : 0;
  float* b = c.kind == "sgd" ? nullptr : b_.data();
  if (c.kind == "sgd")
    backend_.sgd_update(params + d, grads + d, a_.data() + d, n_ - d, lr, c.momentum, c.weight_decay);
  else
    backend_.adam_update(params + d, grads + d, a_.data() + d, b + d, n_ - d, lr, c.beta1, c.beta2, c.eps,
                         c.weight_decay, c.kind == "adamw", steps_);
  if (!sparse || sparse->size() == 0) return;
  const int64_t k = sparse->size();
  if (c.kind == "sgd")
    backend_.sgd_update_rows(params, sparse->rows(), a_.data(), sparse->device_ids(), k, sparse->dim(), lr, c.momentum,
                             c.weight_decay);
  else
    backend_.adam_update_rows(params, sparse->rows(), a_.data(), b, sparse->device_ids(), k, sparse->dim(), lr,
                              c.beta1, c.beta2, c.eps, c.weight_decay, c.kind == "adamw", steps_);
}

std::string sparse_update_refusal(const OptimizerConfig& c) {
  if (c.kind != "sgd") return "";
  if (c.momentum != 0)
    return cat("--sparse-embedding with --optimizer sgd --momentum ", c.momentum,
               ": the velocity of rows a step does not touch would have to decay too (use --momentum 0 or adam)");
  if (c.weight_decay != 0)
    return cat("--sparse-embedding with --optimizer sgd --weight-decay ", c.weight_decay,
               ": SGD decays every row at every step (use --weight-decay 0, or adamw, whose decay is lazy)");
  return "";
}

std::vector<std::pair<std::string, Tensor*>> Optimizer::state() {
  if (config_.kind == "sgd") return {{"momentum_buffer", &a_}};
  return {{"exp_avg", &a_}, {"exp_avg_sq", &b_}};
}

float clip_factor(double norm, float max_norm) {
  if (max_norm <= 0) return 1.0f;
  double f = max_norm / (norm + 1e-6);
  return f < 1.0 ? static_cast<float>(f) : 1.0f;
}

LrSchedule::LrSchedule(const ScheduleConfig& config, float base_lr, int64_t total_steps)
    : config_(config), base_lr_(base_lr), total_steps_(std::max<int64_t>(total_steps, 1)) {
  const auto& k = config.kind;
  if (k != "constant" && k != "step" && k != "plateau" && k != "cosine")
    throw InputError(cat("--lr-schedule: unknown schedule '", k, "' (constant, step, plateau or cosine)"));
  if (config.decay <= 0 || config.decay > 1) throw InputError(cat("--lr-decay must be in (0, 1] (got ", config.decay, ")"));
  if (config.warmup_steps < 0) throw InputError("--warmup-steps must not be negative");
  if (!(config.threshold >= 0 && config.threshold < 1))
    throw InputError(cat("--plateau-threshold must be in [0, 1) (got ", config.threshold, ")"));
}

float LrSchedule::lr(int64_t step, int64_t epoch) const {
  double lr = base_lr_;
  const auto& k = config_.kind;
  if (k == "step") {
    lr *= std::pow(double{config_.decay}, double(std::max<int64_t>(0, epoch - config_.decay_start + 1)));
  } else if (k == "plateau") {
    lr *= plateau_factor;
  } else if (k == "cosine") {
    const int64_t w = config_.warmup_steps;
    const double progress = std::clamp(double(step - w) / double(std::max<int64_t>(total_steps_ - w, 1)), 0.0, 1.0);
    lr *= 0.5 * (1.0 + std::cos(M_PI * progress));
  }
  if (config_.warmup_steps > 0 && step < config_.warmup_steps) lr *= double(step + 1) / double(config_.warmup_steps);
  return static_cast<float>(lr);
}

void LrSchedule::on_validation(double loss) {
  if (loss < best_loss * (1.0 - double{config_.threshold})) {
    best_loss = loss;
  } else if (config_.kind == "plateau") {
    plateau_factor *= config_.decay;
  }
}

}  // namespace rnn_dist

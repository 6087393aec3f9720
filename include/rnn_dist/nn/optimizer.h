// Optimizers over the flat parameter buffer (SGD with momentum, Adam, AdamW, as torch.optim defines
// them), global-norm gradient clipping, and learning-rate schedules.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "rnn_dist/nn/backend.h"
#include "rnn_dist/nn/tensor.h"

namespace rnn_dist {

class SparseRows;

struct OptimizerConfig {
  std::string kind = "adam";  // sgd | adam | adamw
  float lr = 1e-3f, momentum = 0, weight_decay = 0, beta1 = 0.9f, beta2 = 0.999f, eps = 1e-8f;
};

// SGD:  d = g + wd*p; v = momentum*v + d (when momentum != 0, d = v); p -= lr*d
// Adam: g += wd*p; m = b1*m + (1-b1)*g; v = b2*v + (1-b2)*g^2; p -= lr/(1-b1^t) * m / (sqrt(v/(1-b2^t)) + eps)
// AdamW: as Adam, but the decay is p -= lr*wd*p, applied before the update and not through g.
//
// A row-sparse table (--sparse-embedding, SparseRows) gets these formulas on the rows the step touched
// only; a row the step does not touch keeps its value and its state. For SGD without momentum and weight
// decay that is the dense update bitwise (g = 0 leaves p unchanged). For Adam and AdamW it is the lazy
// semantics of torch.optim.SparseAdam (the moments of untouched rows are not decayed; the bias correction
// counts every step) with the formulas above, which SparseAdam's differ from in placing eps
// (m / (sqrt(v) + eps) scaled by sqrt(bc2)) and in having no weight decay: here the touched rows get it.

// Adam's bias corrections of step t (1-based), in the form every backend's update uses:
// p -= step_size * m / (sqrt(v) * inv_sqrt_bc2 + eps), computed in double and rounded once, so backends agree.
struct AdamScalars {
  float step_size, inv_sqrt_bc2;
};
AdamScalars adam_scalars(float lr, float beta1, float beta2, int64_t step);
class Optimizer {
 public:
  Optimizer(Backend& backend, const OptimizerConfig& config, int64_t n);
  // One step over the n parameters. With `sparse`, the gradients below dense_from are not in grads: the
  // table at offset 0 whose touched rows `sparse` holds (a SparseRows of the same backend) is updated on
  // those rows only.
  void step(float* params, const float* grads, float lr, SparseRows* sparse = nullptr, int64_t dense_from = 0);
  const OptimizerConfig& config() const { return config_; }
  int64_t steps() const { return steps_; }
  void set_steps(int64_t s) { steps_ = s; }
  // Named state buffers (flat, same order as the parameters) for checkpoints.
  std::vector<std::pair<std::string, Tensor*>> state();

 private:
  Backend& backend_;
  OptimizerConfig config_;
  int64_t n_, steps_ = 0;
  Tensor a_, b_;  // SGD: velocity; Adam: exp_avg, exp_avg_sq
};

// Why the optimizer cannot update a row-sparse table as it defines (SGD with momentum or weight decay
// changes every row at every step), or "" when it can.
std::string sparse_update_refusal(const OptimizerConfig& config);

// Scales grads so their global L2 norm is at most max_norm (as torch.nn.utils.clip_grad_norm_), given the
// norm already computed. Returns the factor applied (1 when no clipping).
float clip_factor(double norm, float max_norm);

struct ScheduleConfig {
  std::string kind = "constant";  // constant | step | plateau | cosine
  float decay = 0.5f;             // factor of step and plateau
  int64_t decay_start = 2;        // step: first (1-based) epoch whose rate is decayed
  int64_t warmup_steps = 0;       // linear warm-up from lr/warmup to lr
  float threshold = 0.0f;         // plateau: an improvement is below best x (1 - threshold)
};

// Learning rate as a function of progress. plateau keeps state (the factor and the best validation loss),
// saved in checkpoints.
class LrSchedule {
 public:
  LrSchedule(const ScheduleConfig& config, float base_lr, int64_t total_steps);
  // step: 0-based optimizer step; epoch: 1-based.
  float lr(int64_t step, int64_t epoch) const;
  // plateau: decays the rate when the validation loss did not improve on the best so far by more than the
  // relative threshold (as torch's ReduceLROnPlateau, mode min, threshold_mode rel, patience 0).
  void on_validation(double loss);
  double plateau_factor = 1.0, best_loss = 1e300;

 private:
  ScheduleConfig config_;
  float base_lr_;
  int64_t total_steps_;
};

}  // namespace rnn_dist

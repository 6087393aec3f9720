// Validation of the training options (see trainer_config.h).
#include "rnn_dist/train/trainer_config.h"

#include <filesystem>
#include <fstream>

#include "rnn_dist/dist/sparse_exchange.h"
#include "rnn_dist/nn/optimizer.h"
#include "rnn_dist/util/error.h"

namespace rnn_dist {

namespace {
void positive(const char* name, int64_t v) {
  if (v < 1) throw InputError(cat("--", name, " must be at least 1 (got ", v, ")"));
}
}  // namespace

MathMode math_mode_of(const TrainerConfig& c) { return c.tf32 ? MathMode::tf32 : math_mode_from(c.precision); }

void check_run_options(const TrainerConfig& c) {
  positive("threads", c.threads);
  if (c.tf32 && c.precision != "fp32" && c.precision != "tf32")
    throw InputError(cat("--tf32 contradicts --precision ", c.precision));
  if (math_mode_of(c) != MathMode::fp32 && c.device == "cpu")
    throw InputError(cat("--precision ", math_mode_name(math_mode_of(c)),
                         " is a GPU math mode: drop it, or use --device cuda|auto"));
  if (!(c.comm_timeout > 0)) throw InputError(cat("--comm-timeout must be > 0 seconds, got ", c.comm_timeout));
  if (c.batch.batch_tokens == 0 || c.batching == "stream") positive("batch-size", c.batch.batch_size);
  if (c.batch.batch_tokens < 0) throw InputError("--batch-tokens must not be negative");
  if (c.batching != "packed" && c.batching != "stream")
    throw InputError(cat("--batching: unknown mode '", c.batching, "' (packed or stream)"));
  positive("accumulate", c.accumulate);
  if (c.batching == "stream" && c.accumulate > 1)
    throw InputError("--accumulate applies to packed batching only (stream mode: more --batch-size columns)");
  if (c.batching == "stream" && c.batch.batch_tokens > 0)
    throw InputError("--batch-tokens applies to packed batching only (stream mode uses --batch-size columns)");
  if (c.device != "auto" && c.device != "cpu" && c.device != "cuda")
    throw InputError(cat("--device: unknown device '", c.device, "' (auto, cpu or cuda)"));
  if (c.allreduce != "flat" && c.allreduce != "hierarchical")
    throw InputError(cat("--allreduce: unknown algorithm '", c.allreduce, "' (flat or hierarchical)"));
  if (c.allreduce_dtype != "fp32" && c.allreduce_dtype != "bf16")
    throw InputError(cat("--allreduce-dtype: '", c.allreduce_dtype, "' is not fp32 or bf16"));
  sparse_exchange_mode_from(c.sparse_exchange);
  if (c.model.sparse_embedding) {
    const std::string why = sparse_update_refusal(c.optimizer);
    if (!why.empty()) throw InputError(why);
  }
  if (c.overlap != "auto" && c.overlap != "on" && c.overlap != "off")
    throw InputError(cat("--overlap: '", c.overlap, "' is not on, off or auto"));
  if (!(c.bucket_mb > 0) || c.bucket_mb > 1e6) throw InputError(cat("--bucket-mb must be in (0, 1e6] MB, got ", c.bucket_mb));
  if (c.device == "cuda") check_overlap_device(c, DeviceType::cuda);
}

void check_overlap_device(const TrainerConfig& c, DeviceType device) {
  if (c.overlap == "on" && device == DeviceType::cuda)
    throw InputError("--overlap on: not on GPUs yet (their all-reduce runs after the backward pass); use --overlap off");
}

ModelConfig model_config(const TrainerConfig& config, const SequenceFile& train) {
  ModelConfig mc = config.model;
  mc.task = train.task();
  mc.vocab = train.vocab_size();
  mc.classes = static_cast<int64_t>(train.label_vocab().size());
  if (!config.pool.empty() && mc.task != Task::classify)
    throw InputError(cat("--pool: applies to classifiers, and ", config.train, " holds ", task_name(mc.task), " data"));
  mc.pool = config.pool.empty() ? Pool::last : parse_pool(config.pool);
  mc.cutoffs = cutoffs_of(config);
  mc.div_value = config.div_value;
  return mc;
}

BatchingConfig step_batching(const TrainerConfig& c) {
  BatchingConfig b = c.batch;
  b.batch_size *= c.accumulate;
  b.batch_tokens *= c.accumulate;
  return b;
}

std::vector<int64_t> cutoffs_of(const TrainerConfig& c) {
  return c.softmax == "adaptive" ? parse_cutoffs(c.cutoffs, cat("--cutoffs ", c.cutoffs)) : std::vector<int64_t>{};
}

void check_values(const TrainerConfig& c) {
  check_run_options(c);
  positive("embed", c.model.embed);
  positive("hidden", c.model.hidden);
  positive("layers", c.model.layers);
  positive("epochs", c.epochs);
  positive("keep", c.keep);
  positive("log-every", c.log_every);
  positive("max-bad-steps", c.max_bad_steps);
  positive("bptt", c.bptt);
  if (c.model.dropout < 0 || c.model.dropout >= 1)
    throw InputError(cat("--dropout must be in [0, 1) (got ", c.model.dropout, ")"));
  if (!c.task.empty()) parse_task(c.task, "--task");
  if (!c.pool.empty()) parse_pool(c.pool);
  if (c.softmax != "full" && c.softmax != "adaptive")
    throw InputError(cat("--softmax: unknown kind '", c.softmax, "' (full or adaptive)"));
  if (c.softmax == "adaptive" && c.cutoffs.empty())
    throw InputError("--softmax adaptive needs --cutoffs C1,C2,... (the ids where its clusters start)");
  if (c.softmax == "full" && (!c.cutoffs.empty() || c.div_value != 4))
    throw InputError(cat(c.cutoffs.empty() ? "--div-value" : "--cutoffs", ": applies to --softmax adaptive only"));
  if (!(c.div_value > 0)) throw InputError(cat("--div-value ", c.div_value, ": must be positive"));
  cutoffs_of(c);
  if (c.schedule.kind == "plateau" && c.valid.empty())
    throw InputError("--lr-schedule plateau: decays when a validation does not improve, so it needs --valid");
  if (c.select_by != "loss" && c.select_by != "accuracy" && c.select_by != "macro-f1")
    throw InputError(cat("--select-by: unknown metric '", c.select_by, "' (loss, accuracy or macro-f1)"));
  if (c.model.bidirectional && c.task == "lm")
    throw InputError("--bidirectional: a language model would see the tokens it predicts (classify and tag only)");
  if (c.model.bidirectional && c.batching == "stream")
    throw InputError("--bidirectional does not apply to --batching stream (a language model's mode)");
  if (!(c.optimizer.lr > 0)) throw InputError(cat("--lr must be positive (got ", c.optimizer.lr, ")"));
  if (c.clip_norm < 0) throw InputError("--clip-norm must not be negative");
  const OptimizerConfig& op = c.optimizer;
  if (op.momentum < 0 || op.momentum >= 1) throw InputError(cat("--momentum must be in [0, 1) (got ", op.momentum, ")"));
  if (op.weight_decay < 0) throw InputError(cat("--weight-decay must not be negative (got ", op.weight_decay, ")"));
  if (op.beta1 < 0 || op.beta1 >= 1 || op.beta2 < 0 || op.beta2 >= 1)
    throw InputError(cat("--beta1 and --beta2 must be in [0, 1) (got ", op.beta1, ", ", op.beta2, ")"));
  if (!(op.eps > 0)) throw InputError(cat("--eps must be positive (got ", op.eps, ")"));
  if (c.schedule.decay_start < 1) throw InputError(cat("--lr-decay-start is a 1-based epoch (got ", c.schedule.decay_start, ")"));
  if (c.save_every > 0 && c.checkpoint_dir.empty()) throw InputError("--save-every needs --checkpoint-dir");
  if (!c.resume.empty() && c.resume != "auto" && c.resume != "require")
    throw InputError(cat("--resume: unknown mode '", c.resume, "' (auto or require)"));
  if (!c.resume.empty() && c.checkpoint_dir.empty()) throw InputError("--resume needs --checkpoint-dir");
  if (c.max_steps < 0 || c.save_every < 0) throw InputError("--max-steps and --save-every must not be negative");
  if (!c.init_from.empty() && !std::filesystem::is_regular_file(c.init_from))
    throw InputError(cat("--init-from ", c.init_from, ": no such file"));
}

void check_config(const TrainerConfig& c) {
  check_values(c);
  if (!c.checkpoint_dir.empty()) {
    std::error_code ec;
    std::filesystem::create_directories(c.checkpoint_dir, ec);
    const std::string probe = c.checkpoint_dir + "/.write-test";
    std::ofstream f(probe);
    if (!f) throw InputError(cat("--checkpoint-dir ", c.checkpoint_dir, ": not writable"));
    f.close();
    std::filesystem::remove(probe, ec);
  }
}

}  // namespace rnn_dist

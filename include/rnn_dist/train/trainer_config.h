// The options of a training job (TrainerConfig) and their validation, shared by `rnn_dist train` and
// `rnn_dist check`.
#pragma once

#include <cstdint>
#include <string>

#include "rnn_dist/data/dataset.h"
#include "rnn_dist/nn/backend.h"
#include "rnn_dist/nn/model.h"
#include "rnn_dist/nn/optimizer.h"
#include "rnn_dist/train/batch_plan.h"

namespace rnn_dist {

struct TrainerConfig {
  std::string train, valid, test, checkpoint_dir, init_from, metrics;
  std::string resume_command;  // `rnn_dist train ... --resume` as this run was started, printed at the end
  std::string device = "auto", allreduce = "flat", batching = "packed";
  std::string overlap = "auto";  // --overlap: on, off, or auto (on with 4+ ranks on CPUs, flat, more than one bucket)
  double bucket_mb = 25;         // --bucket-mb: the overlapped all-reduce's bucket size
  std::string allreduce_dtype = "fp32";  // --allreduce-dtype: what the gradients travel as (WireType)
  std::string sparse_exchange = "auto";  // --sparse-exchange: how --sparse-embedding's rows travel (SparseExchangeMode)
  ModelConfig model;  // its task and classes come from the training file
  std::string task;   // --task: "" or what the training file's task must be
  std::string pool;                // --pool (classify; empty: not given, which is last)
  std::string softmax = "full";    // --softmax: full or adaptive (lm), with --cutoffs and --div-value
  std::string cutoffs;             // --cutoffs C1,C2,...: the adaptive softmax's (ModelConfig::cutoffs)
  double div_value = 4;            // --div-value
  std::string select_by = "loss";  // --select-by: the validation metric of best.h5 and the plateau schedule
  BatchingConfig batch;
  int64_t bptt = 35;  // stream mode: target tokens per column and step
  int accumulate = 1;  // micro-batches per optimizer step (packed): the step's batch is accumulate x batch
  OptimizerConfig optimizer;
  ScheduleConfig schedule;
  float clip_norm = 0;
  int64_t epochs = 1, max_steps = 0, save_every = 0, log_every = 10, max_bad_steps = 10;
  int keep = 3, threads = 1, ranks_per_node = 0;
  double comm_timeout = 300;  // seconds a GPU collective may take before the job is ended
  bool verbose = false;  // one placement line per rank
  std::string precision = "fp32";  // GPU matrix products: fp32, tf32 or bf16 (MathMode)
  bool tf32 = false;                // --tf32, short for --precision tf32
  bool deterministic = false;  // the CPU backend always is; refused on GPUs until they are
  std::string resume;  // "" (off), "auto" (fresh start when there is no checkpoint) or "require"
  uint64_t seed = 1;
};

// Throws InputError naming the option when a value is out of range or values contradict each other, or
// when --checkpoint-dir cannot be created and written (it is created).
void check_config(const TrainerConfig& config);
// check_config without the checkpoint directory: no side effects (`rnn_dist check` validates with it).
void check_values(const TrainerConfig& config);
// The adaptive softmax's cutoffs from --softmax and --cutoffs (checked by check_config; empty: full).
std::vector<int64_t> cutoffs_of(const TrainerConfig& config);
// The model the options describe for the training file's task, vocabulary and labels (InputError for an
// option that does not apply to its task).
ModelConfig model_config(const TrainerConfig& config, const SequenceFile& train);
// The part of check_config about how the job runs (threads, batching, device, all-reduce), which
// `rnn_dist check` validates too; it has no side effects.
void check_run_options(const TrainerConfig& config);
// Throws InputError when --overlap on meets a GPU, where the all-reduce is not overlapped yet: for
// --device cuda before start-up, and for the device --device auto chose.
void check_overlap_device(const TrainerConfig& config, DeviceType device);
// What one optimizer step reads per rank: --batch-size or --batch-tokens times --accumulate.
BatchingConfig step_batching(const TrainerConfig& config);
// The GPU math mode the options ask for (--precision, or --tf32).
MathMode math_mode_of(const TrainerConfig& config);

}  // namespace rnn_dist

// Checkpoints: HDF5 files DIR/step-NNNNNNNN.h5 written atomically (temporary name, fsync, rename), with
// the parameters under /model named and shaped as PyTorch's state_dict (docs/checkpoint-format.md), plus
// the model configuration, vocabularies, optimizer state and training position; DIR/best.h5 is the
// checkpoint of the best validation so far.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "rnn_dist/nn/model.h"
#include "rnn_dist/nn/optimizer.h"

namespace rnn_dist {

struct TrainingPosition {
  int64_t step = 0;           // optimizer steps taken
  int64_t epoch = 1;          // 1-based epoch in progress
  int64_t step_in_epoch = 0;  // global batches of that epoch already consumed
  bool validated = true;      // false: written at the end of the epoch, before its validation ran
  uint64_t seed = 0;
  double plateau_factor = 1.0, best_loss = 1e300;  // learning-rate schedule state
  double best_objective = 1e300;  // the validation objective (Evaluation::objective) of best.h5
  std::string plan;              // how the data was cut into steps ("packed sequences=64", ...)
  int64_t steps_per_epoch = 0;   // under that plan
  int64_t epoch_rows = -1;       // rows all ranks trained in the epoch in progress so far (-1: not recorded)
  std::vector<float> stream_state;  // stream mode: carried h and c, 2 x layers x columns x hidden
};

// "DIR/step-00000042.h5"
std::string checkpoint_path(const std::string& dir, int64_t step);

// What a model reads and predicts, as names: the tokenizer and its vocabulary, and a classifier's labels or
// a tagger's tags by id (empty for a language model).
struct Vocabularies {
  std::string tokenizer;
  std::vector<std::string> tokens, labels;
  std::string token_split;      // SequenceFile::token_split() of the training data
  std::string tokenizer_model;  // SequenceFile::tokenizer_model(): sentencepiece's .model bytes
};

// "DIR/best.h5"
std::string best_checkpoint_path(const std::string& dir);

// Writes a checkpoint and removes all but the newest `keep` ones in the directory.
void write_checkpoint(const std::string& dir, int keep, Model& model, Optimizer& optimizer, const Vocabularies& vocab,
                      const TrainingPosition& pos);
// Writes DIR/best.h5 (replacing the one before, atomically): a checkpoint like the others, which also
// records the metric it was chosen by (`selected_by`, `selected_value`).
void write_best_checkpoint(const std::string& dir, Model& model, Optimizer& optimizer, const Vocabularies& vocab,
                           const TrainingPosition& pos, const std::string& select_by, double value);

// What a checkpoint holds, read back on the host.
struct CheckpointData {
  ModelConfig config;
  std::string tokenizer, token_split, tokenizer_model;  // as Vocabularies
  std::vector<std::string> vocab, label_vocab;
  std::vector<float> params;  // flat, in Model's order (filled by name and shape, so checked)
  int64_t parameter_count = 0;  // Model::parameter_count(): params without the alignment gaps
  TrainingPosition position;
  std::string optimizer_kind;
  int64_t optimizer_steps = 0;
  std::vector<std::pair<std::string, std::vector<float>>> optimizer_state;  // flat, in Model's order
  std::string selected_by;    // best.h5: the validation metric that chose it ("" otherwise)
  double selected_value = 0;  // and its value
};
// Reads the model part (configuration, vocabulary, parameters by name and shape, position).
CheckpointData read_checkpoint(const std::string& path, Backend& backend);

// A flat buffer in a model's layout (slices from Model::param_slices) in the file's order, the slices back
// to back in their order, and back: backend layouts differ (cuDNN places the LSTM weights its own way,
// with room of its own), the file's order does not. from_file_order throws InputError naming `what` when
// the sizes do not match; elements outside every slice are zero.
std::vector<float> to_file_order(const std::vector<float>& flat, const std::vector<ParamSlice>& slices);
std::vector<float> from_file_order(const std::vector<float>& file, const std::vector<ParamSlice>& slices,
                                   int64_t total, const std::string& what);

// The newest DIR/step-NNNNNNNN.h5, or "" when there is none (or no such directory).
std::string newest_checkpoint(const std::string& dir);

}  // namespace rnn_dist

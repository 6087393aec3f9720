// The loss and the metrics of a model over labelled batches: for a classifier or tagger the confusion
// matrix (accuracy, per-class precision/recall/F1, macro-F1) and, for BIO/IOB tags, entity spans counted
// as conlleval counts them. Sums accumulate per rank and are all-reduced in place through sums().
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "rnn_dist/nn/model.h"

namespace rnn_dist {

// An entity of a BIO/IOB tag sequence: rows [begin, end) of one sequence, of the given type.
struct Chunk {
  int begin = 0, end = 0;
  std::string type;
  bool operator==(const Chunk&) const = default;
};
// True when every tag is O, B-TYPE or I-TYPE (and at least one is not O).
bool is_bio(const std::vector<std::string>& tags);
// The entities of one sequence of tag ids, by conlleval's rules: a chunk starts at B-X, or at I-X after O
// or after a tag of another type (IOB1), and runs over the I-X that follow.
std::vector<Chunk> bio_chunks(const std::vector<int32_t>& ids, const std::vector<std::string>& tags);

class Evaluation {
 public:
  // labels: the label or tag names by id (the file's /label_vocab); empty for a language model.
  Evaluation(Task task, std::vector<std::string> labels);

  // Adds one batch: a language model's evaluate(), or a classifier's or tagger's log_probs() against
  // the batch's labels or targets (one inference pass either way).
  void add(Model& model, const Batch& batch);
  // The same from the batch's log-probabilities (Model::log_probs), computed once for something else too
  // (eval --log-probs writes them): the loss of every task, and a classifier's or tagger's counts.
  void add_log_probs(const Batch& batch, const std::vector<float>& log_probs);
  // Adds a loss summed over `units` terms computed elsewhere (stream mode).
  void add_loss(double loss_sum, double units);

  // Every sum, to all-reduce across ranks in place: loss, units, the confusion matrix, entity counts.
  std::vector<double>& sums() { return sums_; }

  Task task() const { return task_; }
  int classes() const { return static_cast<int>(labels_.size()); }
  double units() const { return sums_[1]; }
  double loss() const { return sums_[0] / sums_[1]; }  // mean per unit
  // Sequences (classify) or tokens (tag) with true label t predicted as p.
  double confusion(int t, int p) const { return sums_[2 + t * classes() + p]; }
  double accuracy() const;
  struct ClassScores {
    double precision = 0, recall = 0, f1 = 0, support = 0;
  };
  ClassScores class_scores(int c) const;
  // Mean F1 over the classes that occur in the truth or the predictions.
  double macro_f1() const;
  bool bio() const { return bio_; }
  ClassScores entity_scores() const;  // precision, recall and F1 of entities; support: true entities

  // What --select-by names, as a value to minimise: the loss, 1 - accuracy or 1 - macro-F1.
  double objective(const std::string& select_by) const;
  // One line of metrics for logs ("loss 0.3121 accuracy 0.9120 macro_f1 0.8790") and the same as JSON
  // members (",\"loss\":...,\"accuracy\":..."); full() adds the per-class scores, the confusion matrix
  // and the entity scores (for `rnn_dist eval`).
  // With many classes the matrix is classes^2 numbers (1,000 classes: 11 MB of text): it is left out
  // above kConfusionMax classes unless `confusion`, and the table shows at most `rows` classes (0: all),
  // the largest (by support) first, then a line counting the rest.
  static constexpr int kConfusionMax = 30;
  std::string line() const;
  std::string json_members(bool full, bool confusion = false) const;
  std::string table(int rows = kConfusionMax, bool confusion = false) const;  // for humans

 private:
  Task task_;
  std::vector<std::string> labels_;
  bool bio_ = false;
  std::vector<double> sums_;
  size_t entity_at_ = 0;  // sums_[entity_at_ ...]: correct, predicted and true entities
  std::vector<int32_t> predicted_, truth_;  // one sequence's tags, reused
};

}  // namespace rnn_dist

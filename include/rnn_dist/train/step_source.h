// Where the steps of an epoch come from on this rank: packed global batches of whole sequences, or the
// columns of a token stream (truncated BPTT). The trainer and its evaluation read batches through one.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "rnn_dist/data/dataset.h"
#include "rnn_dist/nn/model.h"
#include "rnn_dist/train/batch_plan.h"
#include "rnn_dist/train/stream.h"
#include "rnn_dist/util/error.h"

namespace rnn_dist {

// The steps of an epoch on this rank: which batch step k is (read on the read-ahead thread, so load()
// must not touch the source's mutable state) and how many terms the global step's loss has (target
// tokens, tags, or for a classifier sequences), by which each rank scales its gradient.
class StepSource {
 public:
  virtual ~StepSource() = default;
  virtual int64_t steps_per_epoch() const = 0;
  virtual void start_epoch(int64_t epoch) = 0;
  virtual Batch load(int64_t k) const = 0;
  virtual int64_t global_units(int64_t k) const = 0;
  // Rows (input tokens) every rank together trains in one epoch: what an epoch must have trained, each
  // sequence of the plan once (the trainer checks it).
  virtual int64_t epoch_rows() const = 0;
  // What every rank scales its slice's summed-loss gradient by at step k, so that the all-reduce's sum is
  // the gradient of the global batch's mean loss: 1 / the global step's loss terms (tests/test_step_source).
  float gradient_scale(int64_t k) const { return 1.0f / static_cast<float>(global_units(k)); }
  // Identifies how the data is cut into steps: a run that resumes with the same plan (whatever its rank
  // count) continues exactly where the checkpoint stopped.
  virtual std::string plan() const = 0;
  virtual std::string dropped() const = 0;  // what each epoch leaves out, for the start-up line
};

// Packed mode: global batches of consecutive sequences in an order shuffled by (seed, epoch).
class PackedSource : public StepSource {
 public:
  PackedSource(const SequenceFile& file, const BatchingConfig& batching, int world, int rank, uint64_t seed)
      : file_(file),
        cut_(cut_global_batches(file.offsets(), batching, world, framing_of(file.task()))),
        rank_(rank),
        seed_(seed) {
    plan_ = batching.batch_tokens > 0 ? cat("packed tokens=", batching.batch_tokens * world)
                                      : cat("packed sequences=", batching.batch_size * world);
  }
  int64_t steps_per_epoch() const override { return static_cast<int64_t>(cut_.batches.size()); }
  void start_epoch(int64_t epoch) override { order_ = epoch_order(steps_per_epoch(), seed_, epoch); }
  Batch load(int64_t k) const override { return load_batch(file_, cut_.batches[order_[k]].slices[rank_]); }
  int64_t global_units(int64_t k) const override {
    const GlobalBatch& b = cut_.batches[order_[k]];
    return file_.task() == Task::classify ? b.end - b.begin : b.tokens;
  }
  int64_t epoch_rows() const override {
    int64_t rows = 0;
    for (const GlobalBatch& b : cut_.batches) rows += b.tokens;
    return rows;
  }
  std::string plan() const override { return plan_; }
  std::string dropped() const override {
    return cut_.dropped_sequences == 0 ? ""
                                       : cat("tail of ", cut_.dropped_sequences, " sequences / ", cut_.dropped_tokens,
                                             " tokens dropped each epoch");
  }

 private:
  const SequenceFile& file_;
  BatchCut cut_;
  int rank_;
  uint64_t seed_;
  std::vector<int64_t> order_;
  std::string plan_;
};

// Stream mode: `batch_size` columns per rank of the file's token stream; rank r owns columns
// [r*batch_size, (r+1)*batch_size).
class StreamSource : public StepSource {
 public:
  StreamSource(const SequenceFile& file, int64_t batch_size, int64_t bptt, int world, int rank)
      : stream_(file),
        plan_(plan_stream(stream_.size(), batch_size * world, bptt, file.path())),
        first_(rank * batch_size),
        last_((rank + 1) * batch_size) {}
  int64_t steps_per_epoch() const override { return plan_.steps(); }
  void start_epoch(int64_t) override {}
  Batch load(int64_t k) const override { return stream_batch(stream_, plan_, k, first_, last_); }
  int64_t global_units(int64_t k) const override { return plan_.columns * plan_.step_targets(k); }
  int64_t epoch_rows() const override {
    int64_t rows = 0;
    for (int64_t k = 0; k < steps_per_epoch(); ++k) rows += global_units(k);  // one input row per target
    return rows;
  }
  std::string plan() const override { return cat("stream columns=", plan_.columns, " bptt=", plan_.bptt); }
  std::string dropped() const override {
    return plan_.dropped_tokens == 0 ? "" : cat("tail of ", plan_.dropped_tokens, " tokens dropped each epoch");
  }
  int64_t local_columns() const { return last_ - first_; }
  int64_t first_column() const { return first_; }

 private:
  TokenStream stream_;
  StreamPlan plan_;
  int64_t first_, last_;
};

}  // namespace rnn_dist

// How a length-sorted sequence file becomes training steps, as pure functions: the file is cut into
// global batches (batch_size x world sequences, or batch_tokens x world rows) of consecutive sequences, their order is shuffled by (seed, epoch), and each global batch is split into one contiguous,
// token-balanced slice per rank. Every rank computes the same plan, so every rank runs the same steps.
// load_batch() then reads a slice of the plan as a packed batch.
#pragma once

#include <cstdint>
#include <vector>

#include "rnn_dist/util/task.h"

namespace rnn_dist {

class SequenceFile;
struct Batch;

// How many tokens of each sequence are no row of its batch (model.h): a language model's first (no
// token predicts it), a classifier's and a tagger's <s> and </s>. The plan counts rows, the work of a step.
int64_t framing_of(Task task);

struct SliceRange {
  int64_t begin = 0, end = 0;  // sequences [begin, end) of the file
  int64_t tokens = 0;          // rows (sum of length - framing)
};

struct GlobalBatch {
  int64_t begin = 0, end = 0, tokens = 0;
  std::vector<SliceRange> slices;  // one per rank
};

struct BatchingConfig {
  int64_t batch_size = 32;   // sequences per rank (when batch_tokens == 0)
  int64_t batch_tokens = 0;  // row budget per rank (for a language model: target tokens)
};

struct BatchCut {
  std::vector<GlobalBatch> batches;  // in file order
  int64_t dropped_sequences = 0, dropped_tokens = 0;  // the tail that cannot fill a global batch
};

// Throws InputError when a sequence has more rows than --batch-tokens (with --accumulate, the budget of one
// micro-batch, which must hold every sequence whole).
void check_sequences_fit(const std::vector<int64_t>& offsets, const BatchingConfig& config, int64_t framing = 1);
// Cuts the file (offsets as in SequenceFile) into global batches for `world` ranks. Throws InputError
// (naming the option) when a sequence does not fit the token budget or the file has too few sequences.
BatchCut cut_global_batches(const std::vector<int64_t>& offsets, const BatchingConfig& config, int world,
                            int64_t framing = 1);

// Splits [begin, end) into `parts` contiguous slices of at least one sequence, with row counts as equal
// as possible.
std::vector<SliceRange> balanced_slices(const std::vector<int64_t>& offsets, int64_t begin, int64_t end, int parts,
                                        int64_t framing = 1);

// The order of the global batches in an epoch: a permutation of 0..n-1 seeded by (seed, epoch).
std::vector<int64_t> epoch_order(int64_t n, uint64_t seed, int64_t epoch);

// Evaluation: the whole file in consecutive batches (none dropped), batch k going to rank k % world.
std::vector<SliceRange> eval_slices(const std::vector<int64_t>& offsets, const BatchingConfig& config, int world,
                                    int rank, int64_t framing = 1);

// The sequences of `slice` read from `file` as a packed batch of the file's task (model.h), with their
// labels or tags; a sequence with no row is an InputError naming the file.
Batch load_batch(const SequenceFile& file, const SliceRange& slice);

}  // namespace rnn_dist

// How a length-sorted sequence file becomes training steps, as pure functions: the file is cut into
// global batches (batch_size x world sequences, or batch_tokens x world target tokens) of consecutive
// sequences, their order is shuffled by (seed, epoch), and each global batch is split into one contiguous,
// token-balanced slice per rank. Every rank computes the same plan, so every rank runs the same steps.
// load_batch() then reads a slice of the plan as a packed batch.
#pragma once

#include <cstdint>
#include <vector>

namespace rnn_dist {

class SequenceFile;
struct Batch;

struct SliceRange {
  int64_t begin = 0, end = 0;  // sequences [begin, end) of the file
  int64_t tokens = 0;          // target tokens (sum of length - 1)
};

struct GlobalBatch {
  int64_t begin = 0, end = 0, tokens = 0;
  std::vector<SliceRange> slices;  // one per rank
};

struct BatchingConfig {
  int64_t batch_size = 32;   // sequences per rank (when batch_tokens == 0)
  int64_t batch_tokens = 0;  // target-token budget per rank
};

struct BatchCut {
  std::vector<GlobalBatch> batches;  // in file order
  int64_t dropped_sequences = 0, dropped_tokens = 0;  // the tail that cannot fill a global batch
};

// Cuts the file (offsets as in SequenceFile) into global batches for `world` ranks. Throws InputError
// (naming the option) when a sequence does not fit the token budget or the file has too few sequences.
BatchCut cut_global_batches(const std::vector<int64_t>& offsets, const BatchingConfig& config, int world);

// Splits [begin, end) into `parts` contiguous slices of at least one sequence, with target-token counts
// as equal as possible.
std::vector<SliceRange> balanced_slices(const std::vector<int64_t>& offsets, int64_t begin, int64_t end, int parts);

// The order of the global batches in an epoch: a permutation of 0..n-1 seeded by (seed, epoch).
std::vector<int64_t> epoch_order(int64_t n, uint64_t seed, int64_t epoch);

// Evaluation: the whole file in consecutive batches (none dropped), batch k going to rank k % world.
std::vector<SliceRange> eval_slices(const std::vector<int64_t>& offsets, const BatchingConfig& config, int world,
                                    int rank);

// The sequences of `slice` read from `file` as a packed batch (model.h); a sequence shorter than 2 tokens
// is an InputError naming the file.
Batch load_batch(const SequenceFile& file, const SliceRange& slice);

}  // namespace rnn_dist

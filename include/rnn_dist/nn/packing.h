// The packed batch layout shared by every backend: which rows of a batch belong to which step.
#pragma once

#include <cstdint>
#include <span>
#include <string_view>
#include <vector>

namespace rnn_dist {

// A packed batch, as cuDNN's CUDNN_RNN_DATA_LAYOUT_SEQ_MAJOR_PACKED and PyTorch's PackedSequence: sequences
// sorted longest first; step t holds the first batch_sizes[t] sequences, whose rows are contiguous from
// step_offset[t]. Since lengths do not increase, the sequences active at step t are a prefix of those active
// at step t-1.
struct Packing {
  std::vector<int> lengths;          // B entries, non-increasing, >= 1
  std::vector<int> batch_sizes;      // T = lengths[0] entries
  std::vector<int64_t> step_offset;  // T+1 entries; step_offset[T] = rows = sum of lengths

  // Throws rnn_dist::Error if lengths is empty, not non-increasing, or holds a length below 1.
  static Packing from_lengths(std::span<const int> lengths);

  int batch() const { return static_cast<int>(lengths.size()); }
  int steps() const { return static_cast<int>(batch_sizes.size()); }
  int64_t rows() const { return step_offset.back(); }
  // Packed row of sequence b at step t (requires t < lengths[b]).
  int64_t row(int t, int b) const { return step_offset[t] + b; }
};

// How a classifier reduces each sequence's rows of LSTM outputs to one row: last (the final state of each
// direction: the forward half of its last row, the reverse half of its first, as PyTorch's h_n), or the
// mean or the maximum over its rows.
enum class Pool { last, mean, max };
// "last", "mean" or "max"; anything else is an InputError naming --pool.
Pool parse_pool(std::string_view name);
const char* pool_name(Pool pool);

}  // namespace rnn_dist

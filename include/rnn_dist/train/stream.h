// Stream mode (truncated BPTT): a split's sequences concatenated in input order (source_index) into one
// token stream, cut into `columns` equal columns. Step k feeds every column's next bptt tokens and
// predicts each one's successor; the hidden state of a column is carried from one step to the next.
// Rank r owns a contiguous range of columns, so its state never leaves it.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "rnn_dist/data/dataset.h"
#include "rnn_dist/nn/model.h"

namespace rnn_dist {

struct StreamPlan {
  int64_t columns = 0;         // global columns (batch size x ranks)
  int64_t column_length = 0;   // tokens per column
  int64_t bptt = 0;            // target tokens per column and step (the last step may have fewer)
  int64_t dropped_tokens = 0;  // the tail that does not fill every column
  int64_t steps() const { return (column_length - 2) / bptt + 1; }
  int64_t step_targets(int64_t k) const { return std::min(bptt, column_length - 1 - k * bptt); }
};

// Cuts a stream of `tokens` tokens into `columns` columns. Throws InputError naming `file` when the
// columns would hold fewer than 2 tokens each.
StreamPlan plan_stream(int64_t tokens, int64_t columns, int64_t bptt, const std::string& file);

// The token stream of a sequence file in input order, read in ranges as hyperslabs; holds two integers
// per sequence, never the tokens.
class TokenStream {
 public:
  explicit TokenStream(const SequenceFile& file);
  int64_t size() const { return start_.back(); }
  // Appends stream tokens [begin, end) to out.
  void read(int64_t begin, int64_t end, std::vector<int32_t>& out) const;

 private:
  const SequenceFile& file_;
  std::vector<int64_t> start_;   // stream position of the j-th input sequence (j = 0..n)
  std::vector<int64_t> sorted_;  // its index in the length-sorted file
};

// The packed batch of step k for columns [first, last): each column's step_targets(k)+1 tokens.
Batch stream_batch(const TokenStream& stream, const StreamPlan& plan, int64_t k, int64_t first, int64_t last);

}  // namespace rnn_dist

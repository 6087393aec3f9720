// Stream mode: the token stream of a file in input order, and the batches of truncated BPTT (see stream.h).
#include "rnn_dist/train/stream.h"

#include <algorithm>

#include "rnn_dist/util/error.h"

namespace rnn_dist {

StreamPlan plan_stream(int64_t tokens, int64_t columns, int64_t bptt, const std::string& file) {
  if (columns < 1 || bptt < 1) throw InputError(cat("stream mode needs columns and --bptt of at least 1"));
  StreamPlan p;
  p.columns = columns;
  p.bptt = bptt;
  p.column_length = tokens / columns;
  p.dropped_tokens = tokens - p.column_length * columns;
  if (p.column_length < 2)
    throw InputError(cat(file, ": ", tokens, " tokens cannot fill ", columns, " stream columns of 2 tokens or more"));
  return p;
}

TokenStream::TokenStream(const SequenceFile& file) : file_(file) {
  const int64_t n = file.num_sequences();
  const std::vector<int64_t> source = file.read_source_index(0, n);
  sorted_.assign(n, -1);
  for (int64_t i = 0; i < n; ++i) {
    if (source[i] < 0 || source[i] >= n || sorted_[source[i]] >= 0)
      throw InputError(cat(file.path(), ": /source_index is not a permutation of 0..", n - 1));
    sorted_[source[i]] = i;
  }
  start_.assign(n + 1, 0);
  for (int64_t j = 0; j < n; ++j) start_[j + 1] = start_[j] + file.length(sorted_[j]);
}

void TokenStream::read(int64_t begin, int64_t end, std::vector<int32_t>& out) const {
  if (begin < 0 || end > size() || begin > end)
    throw Error(cat(file_.path(), ": stream range [", begin, ", ", end, ") out of bounds"));
  std::vector<int32_t> piece;
  int64_t j = std::upper_bound(start_.begin(), start_.end(), begin) - start_.begin() - 1;
  for (int64_t pos = begin; pos < end; ++j) {
    const int64_t first = file_.offsets()[sorted_[j]] + (pos - start_[j]);
    const int64_t count = std::min(end, start_[j + 1]) - pos;
    file_.read_token_range(first, first + count, piece);
    out.insert(out.end(), piece.begin(), piece.end());
    pos += count;
  }
}

Batch stream_batch(const TokenStream& stream, const StreamPlan& plan, int64_t k, int64_t first, int64_t last) {
  const int64_t targets = plan.step_targets(k);
  std::vector<int32_t> tokens;
  tokens.reserve((last - first) * (targets + 1));
  for (int64_t c = first; c < last; ++c) {
    const int64_t begin = c * plan.column_length + k * plan.bptt;
    stream.read(begin, begin + targets + 1, tokens);
  }
  return make_batch(tokens, std::vector<int64_t>(last - first, targets + 1));
}

}  // namespace rnn_dist

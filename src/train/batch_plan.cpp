// Global batches, balanced slices and epoch order (see batch_plan.h).
#include "rnn_dist/train/batch_plan.h"

#include <algorithm>
#include <numeric>

#include "rnn_dist/data/dataset.h"
#include "rnn_dist/nn/model.h"
#include "rnn_dist/util/error.h"
#include "rnn_dist/util/random.h"

namespace rnn_dist {
namespace {

int64_t rows(const std::vector<int64_t>& offsets, int64_t i, int64_t framing) {
  return offsets[i + 1] - offsets[i] - framing;
}

int64_t range_rows(const std::vector<int64_t>& offsets, int64_t begin, int64_t end, int64_t framing) {
  return offsets[end] - offsets[begin] - framing * (end - begin);
}

// Consecutive batches of the file: fixed sequence count, or greedy up to a token budget.
std::vector<std::pair<int64_t, int64_t>> cut(const std::vector<int64_t>& offsets, const BatchingConfig& c,
                                             int64_t min_sequences, int64_t scale, int64_t framing) {
  const int64_t n = static_cast<int64_t>(offsets.size()) - 1;
  std::vector<std::pair<int64_t, int64_t>> out;
  if (c.batch_tokens <= 0) {
    const int64_t size = c.batch_size * scale;
    for (int64_t b = 0; b < n; b += size) out.emplace_back(b, std::min(n, b + size));
    return out;
  }
  const int64_t budget = c.batch_tokens * scale;
  for (int64_t b = 0; b < n;) {
    int64_t e = b, tokens = 0;
    while (e < n && (e - b < min_sequences || tokens + rows(offsets, e, framing) <= budget))
      tokens += rows(offsets, e++, framing);
    out.emplace_back(b, e);
    b = e;
  }
  return out;
}

}  // namespace

int64_t framing_of(Task task) { return task == Task::lm ? 1 : 2; }

std::vector<SliceRange> balanced_slices(const std::vector<int64_t>& offsets, int64_t begin, int64_t end, int parts,
                                        int64_t framing) {
  auto rows_in = [&](int64_t b, int64_t e) { return range_rows(offsets, b, e, framing); };
  if (end - begin < parts) throw Error("balanced_slices: fewer sequences than parts");
  std::vector<SliceRange> out;
  int64_t start = begin;
  for (int k = 1; k <= parts; ++k) {
    int64_t stop = end;
    if (k < parts) {
      // Aim at an equal share of the tokens still left (not a fixed k/parts point, so misses do not add up):
      // the first cut reaching it, or the one before it if that is closer.
      const double goal = double(rows_in(begin, start)) +
                          double(rows_in(start, end)) / (parts - k + 1);
      const int64_t lo = start + 1, hi = end - (parts - k);
      int64_t j = lo;
      while (j < hi && rows_in(begin, j) < goal) ++j;
      if (j > lo && goal - rows_in(begin, j - 1) < rows_in(begin, j) - goal) --j;
      stop = j;
    }
    out.push_back({start, stop, rows_in(start, stop)});
    start = stop;
  }
  return out;
}

void check_sequences_fit(const std::vector<int64_t>& offsets, const BatchingConfig& config, int64_t framing) {
  if (config.batch_tokens <= 0) return;
  for (int64_t i = 0; i + 1 < static_cast<int64_t>(offsets.size()); ++i)
    if (rows(offsets, i, framing) > config.batch_tokens)
      throw InputError(cat("--batch-tokens ", config.batch_tokens, " is smaller than sequence ", i, " (",
                           rows(offsets, i, framing), framing == 1 ? " target tokens" : " tokens",
                           "); raise it or re-run rnn_prep with --max-len"));
}

BatchCut cut_global_batches(const std::vector<int64_t>& offsets, const BatchingConfig& config, int world,
                            int64_t framing) {
  auto rows_in = [&](int64_t b, int64_t e) { return range_rows(offsets, b, e, framing); };
  if (config.batch_tokens <= 0 && config.batch_size < 1)
    throw InputError(cat("--batch-size must be at least 1 (got ", config.batch_size, ")"));
  const int64_t n = static_cast<int64_t>(offsets.size()) - 1;
  check_sequences_fit(offsets, config, framing);
  BatchCut result;
  for (auto [b, e] : cut(offsets, config, world, world, framing)) {
    const bool full = config.batch_tokens > 0 ? e - b >= world : e - b == config.batch_size * world;
    if (!full) {
      result.dropped_sequences += e - b;
      result.dropped_tokens += rows_in(b, e);
      continue;
    }
    result.batches.push_back({b, e, rows_in(b, e), balanced_slices(offsets, b, e, world, framing)});
  }
  if (result.batches.empty())
    throw InputError(cat("the training file has ", n, " sequences: too few for one global batch of ",
                         config.batch_tokens > 0 ? cat(config.batch_tokens, " tokens") : cat(config.batch_size, " sequences"),
                         " x ", world, " ranks (lower --batch-size / --batch-tokens)"));
  return result;
}

std::vector<int64_t> epoch_order(int64_t n, uint64_t seed, int64_t epoch) {
  std::vector<int64_t> order(n);
  std::iota(order.begin(), order.end(), 0);
  Rng rng(mix_seed(seed, static_cast<uint64_t>(epoch)));
  rng.shuffle(order);
  return order;
}

std::vector<SliceRange> eval_slices(const std::vector<int64_t>& offsets, const BatchingConfig& config, int world,
                                    int rank, int64_t framing) {
  std::vector<SliceRange> out;
  auto batches = cut(offsets, config, 1, 1, framing);
  for (size_t k = rank; k < batches.size(); k += world) {
    auto [b, e] = batches[k];
    out.push_back({b, e, range_rows(offsets, b, e, framing)});
  }
  return out;
}

Batch load_batch(const SequenceFile& file, const SliceRange& slice) {
  const Task task = file.task();
  std::vector<int32_t> tokens, targets;
  file.read_tokens(slice.begin, slice.end, tokens);
  std::vector<int64_t> lengths(slice.end - slice.begin);
  for (int64_t i = slice.begin; i < slice.end; ++i) {
    lengths[i - slice.begin] = file.length(i);
    if (lengths[i - slice.begin] <= framing_of(task))
      throw InputError(cat(file.path(), ": sequence ", i, task == Task::lm ? " has fewer than 2 tokens"
                                                                          : " has no token between <s> and </s>"));
  }
  if (task == Task::classify) file.read_labels(slice.begin, slice.end, targets);
  if (task == Task::tag) file.read_tags(slice.begin, slice.end, targets);
  return make_batch(task, tokens, lengths, targets);
}

}  // namespace rnn_dist

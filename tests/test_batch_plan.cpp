// Tests of the batch plan (batch_plan.h): cut_global_batches in batch_size and batch_tokens modes for world
// sizes 1-4 (every sequence used exactly once or counted in the dropped tail, contiguous non-empty
// token-balanced slices, the token budget and its min-sequences exception, InputError on bad options),
// balanced_slices, epoch_order (a deterministic permutation that changes with the epoch and the seed) and
// eval_slices (all ranks together cover the file exactly once).
#include "rnn_dist/train/batch_plan.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <cstdint>
#include <functional>
#include <random>
#include <vector>

#include "rnn_dist/util/error.h"

namespace rnn_dist {
namespace {

// Offsets of `n` sequences with lengths in [2, max_len], sorted longest first, as in a SequenceFile.
std::vector<int64_t> synthetic_offsets(int64_t n, int max_len, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int> len(2, max_len);
  std::vector<int64_t> lengths(n);
  for (auto& l : lengths) l = len(rng);
  std::sort(lengths.begin(), lengths.end(), std::greater<>());
  std::vector<int64_t> offsets{0};
  for (int64_t l : lengths) offsets.push_back(offsets.back() + l);
  return offsets;
}

int64_t num_sequences(const std::vector<int64_t>& offsets) { return static_cast<int64_t>(offsets.size()) - 1; }
int64_t targets_of(const std::vector<int64_t>& offsets, int64_t i) { return offsets[i + 1] - offsets[i] - 1; }
int64_t targets_of(const std::vector<int64_t>& offsets, int64_t b, int64_t e) {
  int64_t t = 0;
  for (int64_t i = b; i < e; ++i) t += targets_of(offsets, i);
  return t;
}

// Checks the slices of [begin, end): `parts` contiguous non-empty slices covering it with correct token
// counts, balanced to within the longest sequence of the range.
void check_slices(const std::vector<int64_t>& offsets, const std::vector<SliceRange>& slices, int64_t begin,
                  int64_t end, int parts) {
  ASSERT_EQ(static_cast<int>(slices.size()), parts);
  EXPECT_EQ(slices.front().begin, begin);
  EXPECT_EQ(slices.back().end, end);
  int64_t longest = 0;
  for (int64_t i = begin; i < end; ++i) longest = std::max(longest, targets_of(offsets, i));
  int64_t lo = INT64_MAX, hi = INT64_MIN;
  for (size_t k = 0; k < slices.size(); ++k) {
    const SliceRange& s = slices[k];
    EXPECT_LT(s.begin, s.end) << "slice " << k << " is empty";
    if (k > 0) {
      EXPECT_EQ(s.begin, slices[k - 1].end) << "slice " << k << " is not contiguous";
    }
    EXPECT_EQ(s.tokens, targets_of(offsets, s.begin, s.end)) << "slice " << k;
    lo = std::min(lo, s.tokens);
    hi = std::max(hi, s.tokens);
  }
  // What balanced_slices guarantees: each cut aims at an equal share of the tokens left, so every slice
  // is within one longest sequence of the mean. (max - min <= longest is not guaranteed by this greedy
  // rule in every case; SpreadWithinLongestSequence pins a case where the earlier rule failed it.)
  const int64_t total = targets_of(offsets, begin, end);
  for (const SliceRange& s : slices)
    EXPECT_LE(std::abs(s.tokens * parts - total), longest * parts)
        << "slice [" << s.begin << ", " << s.end << ") of [" << begin << ", " << end << ") is unbalanced";
  EXPECT_LE(hi - lo, 2 * longest) << "slices of [" << begin << ", " << end << ") are unbalanced";
}

// Checks the structure shared by both modes and returns how often each sequence was used.
std::vector<int> check_cut(const std::vector<int64_t>& offsets, const BatchCut& cut, int world) {
  const int64_t n = num_sequences(offsets);
  std::vector<int> used(n, 0);
  int64_t prev_end = 0;
  for (const GlobalBatch& g : cut.batches) {
    EXPECT_GE(g.begin, prev_end) << "global batches out of file order";
    prev_end = g.end;
    EXPECT_EQ(g.tokens, targets_of(offsets, g.begin, g.end));
    check_slices(offsets, g.slices, g.begin, g.end, world);
    for (const SliceRange& s : g.slices)
      for (int64_t i = s.begin; i < s.end; ++i) ++used[i];
  }
  // Whatever is not in a batch is the dropped tail, and its counts must match.
  int64_t unused = 0, unused_tokens = 0;
  for (int64_t i = 0; i < n; ++i) {
    EXPECT_LE(used[i], 1) << "sequence " << i << " used twice";
    if (used[i] == 0) {
      ++unused;
      unused_tokens += targets_of(offsets, i);
    }
  }
  EXPECT_EQ(cut.dropped_sequences, unused);
  EXPECT_EQ(cut.dropped_tokens, unused_tokens);
  return used;
}

TEST(BatchPlan, BatchSizeModeUsesEverySequenceOnce) {
  for (int world = 1; world <= 4; ++world) {
    for (int64_t batch_size : {1, 2, 3, 5}) {
      for (uint32_t seed : {1u, 2u, 3u}) {
        SCOPED_TRACE(testing::Message() << "world " << world << " batch_size " << batch_size << " seed " << seed);
        const auto offsets = synthetic_offsets(97, 40, seed);
        const int64_t n = num_sequences(offsets);
        BatchingConfig config;
        config.batch_size = batch_size;
        const BatchCut cut = cut_global_batches(offsets, config, world);
        const int64_t global = batch_size * world;
        ASSERT_EQ(static_cast<int64_t>(cut.batches.size()), n / global);
        for (size_t k = 0; k < cut.batches.size(); ++k) {
          EXPECT_EQ(cut.batches[k].begin, static_cast<int64_t>(k) * global);
          EXPECT_EQ(cut.batches[k].end - cut.batches[k].begin, global);
        }
        EXPECT_EQ(cut.dropped_sequences, n % global);
        EXPECT_EQ(cut.dropped_tokens, targets_of(offsets, n - n % global, n));
        const auto used = check_cut(offsets, cut, world);
        // The dropped sequences are the tail of the file.
        for (int64_t i = 0; i < n; ++i) EXPECT_EQ(used[i], i < n - n % global ? 1 : 0) << "sequence " << i;
      }
    }
  }
}

TEST(BatchPlan, BatchTokensModeRespectsBudget) {
  for (int world = 1; world <= 4; ++world) {
    for (int64_t budget : {40, 64, 150}) {
      for (uint32_t seed : {4u, 5u, 6u}) {
        SCOPED_TRACE(testing::Message() << "world " << world << " batch_tokens " << budget << " seed " << seed);
        const auto offsets = synthetic_offsets(101, 40, seed);
        const int64_t n = num_sequences(offsets);
        BatchingConfig config;
        config.batch_tokens = budget;
        const BatchCut cut = cut_global_batches(offsets, config, world);
        ASSERT_FALSE(cut.batches.empty());
        const auto used = check_cut(offsets, cut, world);
        // Batches are consecutive from the start of the file; the dropped part (fewer than `world`
        // sequences) is the tail.
        EXPECT_EQ(cut.batches.front().begin, 0);
        for (size_t k = 1; k < cut.batches.size(); ++k) EXPECT_EQ(cut.batches[k].begin, cut.batches[k - 1].end);
        EXPECT_EQ(cut.batches.back().end + cut.dropped_sequences, n);
        EXPECT_LT(cut.dropped_sequences, world);
        for (int64_t i = 0; i < n; ++i) EXPECT_EQ(used[i], i < cut.batches.back().end ? 1 : 0) << "sequence " << i;
        for (const GlobalBatch& g : cut.batches) {
          const int64_t count = g.end - g.begin;
          EXPECT_GE(count, world);
          // Over the budget only by the min-sequences rule: exactly `world` sequences.
          if (g.tokens > budget * world) {
            EXPECT_EQ(count, world) << "batch [" << g.begin << ", " << g.end << ")";
          }
          // Greedy: the next sequence would not have fitted.
          if (g.end < n) {
            EXPECT_GT(g.tokens + targets_of(offsets, g.end), budget * world) << "batch [" << g.begin << ", " << g.end << ")";
          }
        }
      }
    }
  }
}

TEST(BatchPlan, MinSequencesRuleExceedsBudget) {
  // Long sequences of 30 targets with a budget of 30 per rank: world 4 takes 4 sequences (120 tokens).
  std::vector<int64_t> offsets{0};
  for (int i = 0; i < 9; ++i) offsets.push_back(offsets.back() + 31);
  BatchingConfig config;
  config.batch_tokens = 30;
  const BatchCut cut = cut_global_batches(offsets, config, 4);
  ASSERT_EQ(cut.batches.size(), 2u);
  EXPECT_EQ(cut.batches[0].end - cut.batches[0].begin, 4);
  EXPECT_EQ(cut.batches[0].tokens, 120);
  EXPECT_EQ(cut.dropped_sequences, 1);
  EXPECT_EQ(cut.dropped_tokens, 30);
  check_cut(offsets, cut, 4);
}

TEST(BatchPlan, ThrowsInputError) {
  const auto offsets = synthetic_offsets(20, 40, 7);
  const int64_t longest = targets_of(offsets, 0);
  BatchingConfig config;
  config.batch_tokens = longest - 1;  // the longest sequence does not fit
  EXPECT_THROW(cut_global_batches(offsets, config, 1), InputError);
  config.batch_tokens = longest;  // it does, exactly
  EXPECT_NO_THROW(cut_global_batches(offsets, config, 1));

  BatchingConfig sized;
  sized.batch_size = 0;
  EXPECT_THROW(cut_global_batches(offsets, sized, 1), InputError);
  sized.batch_size = 6;  // 6 x 4 = 24 > 20 sequences: no global batch
  EXPECT_THROW(cut_global_batches(offsets, sized, 4), InputError);
  sized.batch_size = 5;
  EXPECT_NO_THROW(cut_global_batches(offsets, sized, 4));
}

TEST(BatchPlan, BalancedSlices) {
  for (uint32_t seed = 10; seed < 40; ++seed) {
    const auto offsets = synthetic_offsets(60, 50, seed);
    for (int parts = 1; parts <= 4; ++parts) {
      for (auto [b, e] : {std::pair<int64_t, int64_t>{0, 60}, {3, 3 + parts}, {10, 27}, {41, 60}}) {
        SCOPED_TRACE(testing::Message() << "seed " << seed << " parts " << parts << " [" << b << ", " << e << ")");
        check_slices(offsets, balanced_slices(offsets, b, e, parts), b, e, parts);
      }
    }
  }
  // Equal lengths split evenly.
  std::vector<int64_t> even{0};
  for (int i = 0; i < 8; ++i) even.push_back(even.back() + 5);
  const auto s = balanced_slices(even, 0, 8, 4);
  for (const SliceRange& r : s) EXPECT_EQ(r.end - r.begin, 2);
  EXPECT_THROW(balanced_slices(even, 0, 3, 4), Error);
}

// Known weakness (reported, not fixed): each cut goes independently to the prefix nearest k/parts of the
// tokens, so rounding errors of neighbouring cuts add up and the spread can reach almost twice the longest
// sequence although a partition within one longest sequence exists. Here the targets are
// 46 45 45 44 | 44 42 39 | 37 37 35 35 33 | ... : balanced_slices gives 180/125/178/160 (spread 55 > 46)
// where 4/4/4/5 sequences give 180/169/144/163 (spread 36).
TEST(BatchPlan, SpreadWithinLongestSequence) {
  const std::vector<int64_t> targets{46, 45, 45, 44, 44, 42, 39, 37, 37, 35, 35, 34, 33, 33, 32, 31, 31};
  std::vector<int64_t> offsets{0};
  for (int64_t t : targets) offsets.push_back(offsets.back() + t + 1);
  const auto slices = balanced_slices(offsets, 0, static_cast<int64_t>(targets.size()), 4);
  int64_t lo = INT64_MAX, hi = INT64_MIN;
  for (const SliceRange& s : slices) {
    lo = std::min(lo, s.tokens);
    hi = std::max(hi, s.tokens);
  }
  EXPECT_LE(hi - lo, targets.front());
}

TEST(BatchPlan, EpochOrder) {
  const int64_t n = 50;
  const auto a = epoch_order(n, 42, 3);
  auto sorted = a;
  std::sort(sorted.begin(), sorted.end());
  for (int64_t i = 0; i < n; ++i) ASSERT_EQ(sorted[i], i) << "not a permutation";
  EXPECT_EQ(a, epoch_order(n, 42, 3));
  EXPECT_NE(a, epoch_order(n, 42, 4));
  EXPECT_NE(a, epoch_order(n, 43, 3));
  std::vector<int64_t> identity(n);
  for (int64_t i = 0; i < n; ++i) identity[i] = i;
  EXPECT_NE(a, identity) << "not shuffled";
  EXPECT_TRUE(epoch_order(0, 1, 0).empty());
  EXPECT_EQ(epoch_order(1, 1, 0), std::vector<int64_t>{0});
}

TEST(BatchPlan, EvalSlicesCoverEverySequenceOnce) {
  for (int world = 1; world <= 4; ++world) {
    for (bool tokens_mode : {false, true}) {
      SCOPED_TRACE(testing::Message() << "world " << world << (tokens_mode ? " batch_tokens" : " batch_size"));
      const auto offsets = synthetic_offsets(53, 40, 8 + world);
      const int64_t n = num_sequences(offsets);
      BatchingConfig config;
      if (tokens_mode)
        config.batch_tokens = 70;
      else
        config.batch_size = 4;
      std::vector<int> used(n, 0);
      std::vector<std::vector<SliceRange>> per_rank;
      for (int rank = 0; rank < world; ++rank) {
        per_rank.push_back(eval_slices(offsets, config, world, rank));
        for (const SliceRange& s : per_rank.back()) {
          EXPECT_LT(s.begin, s.end);
          EXPECT_EQ(s.tokens, targets_of(offsets, s.begin, s.end));
          if (tokens_mode) {
            EXPECT_TRUE(s.tokens <= config.batch_tokens || s.end - s.begin == 1);
          } else {
            EXPECT_LE(s.end - s.begin, config.batch_size);
          }
          for (int64_t i = s.begin; i < s.end; ++i) ++used[i];
        }
      }
      for (int64_t i = 0; i < n; ++i) EXPECT_EQ(used[i], 1) << "sequence " << i;
      // Batch k of the file goes to rank k % world: interleaving the ranks' lists walks the file in order.
      int64_t next = 0;
      for (size_t k = 0;; ++k) {
        const auto& mine = per_rank[k % world];
        if (k / world >= mine.size()) break;
        EXPECT_EQ(mine[k / world].begin, next) << "batch " << k;
        next = mine[k / world].end;
      }
      EXPECT_EQ(next, n);
    }
  }
}

}  // namespace
}  // namespace rnn_dist

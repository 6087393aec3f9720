// Tests of the trainer's step sources (step_source.h) and the gradient scale the trainer takes from them: every
// rank divides its slice's summed loss by the global step's loss terms, so the ranks' gradients add up to
// one rank's gradient of the whole global batch. The slices here have unequal token counts, where
// dividing by a rank's own count instead (the bug this guards against) gives another answer.
#include "rnn_dist/train/step_source.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "rnn_dist/backends/make_backend.h"
#include "rnn_dist/data/dataset.h"
#include "test_util.h"

namespace rnn_dist {
namespace {

// 23 sequences of lengths 2 to 24 (random ids 4..9): a global batch of 2 ranks x 3 sequences is split by
// tokens, so the two slices of a step differ in tokens and in sequence count.
std::string write_file(const std::string& dir) {
  std::mt19937 rng(3);
  std::uniform_int_distribution<int32_t> tok(4, 9);
  SequenceWriter w(dir + "/train.h5", "char");
  for (int n = 2; n <= 24; ++n) {
    std::vector<int32_t> s(static_cast<size_t>(n));
    for (int32_t& t : s) t = tok(rng);
    s.front() = 1, s.back() = 2;
    w.add(s);
  }
  w.finish({"<pad>", "<s>", "</s>", "<unk>", "a", "b", "c", "d", "e", "f"});
  return dir + "/train.h5";
}

std::vector<float> grads_of(Model& m) {
  std::vector<float> g(size_t(m.num_params()));
  m.backend().download(g.data(), m.grads().data(), g.size() * sizeof(float));
  return g;
}

TEST(StepSource, RanksScaledByTheGlobalUnitsAddUpToOneRank) {
  TempDir dir;
  const SequenceFile file = SequenceFile::open(write_file(dir.path()));
  BatchingConfig per_rank;
  per_rank.batch_size = 3;
  BatchingConfig whole = per_rank;
  whole.batch_size = 6;
  PackedSource one(file, whole, 1, 0, 7), r0(file, per_rank, 2, 0, 7), r1(file, per_rank, 2, 1, 7);
  ASSERT_EQ(one.steps_per_epoch(), r0.steps_per_epoch());
  ASSERT_EQ(one.plan(), r0.plan());  // the same global batches: N ranks = 1 rank
  for (StepSource* s : {static_cast<StepSource*>(&one), static_cast<StepSource*>(&r0), static_cast<StepSource*>(&r1)})
    s->start_epoch(2);

  auto backend = make_backend(DeviceType::cpu, 0, 1);
  ModelConfig c;
  c.vocab = 10, c.embed = 3, c.hidden = 4, c.layers = 1;
  Model m(*backend, c);
  m.init(5);
  int unequal = 0;
  for (int64_t k = 0; k < one.steps_per_epoch(); ++k) {
    const Batch all = one.load(k), a = r0.load(k), b = r1.load(k);
    // The global units are the whole step's, the same on every rank, and the sum of the slices'.
    EXPECT_EQ(r0.global_units(k), all.units());
    EXPECT_EQ(r1.global_units(k), all.units());
    EXPECT_EQ(a.units() + b.units(), all.units());
    unequal += a.units() != b.units();

    backend->zero(m.grads().data(), m.grads().numel());
    m.forward_backward(all, one.gradient_scale(k), 0);
    const std::vector<float> want = grads_of(m);
    backend->zero(m.grads().data(), m.grads().numel());
    m.forward_backward(a, r0.gradient_scale(k), 0);  // rank 0's share ...
    m.forward_backward(b, r1.gradient_scale(k), 0);  // ... plus rank 1's: the all-reduce's sum
    const std::vector<float> got = grads_of(m);
    for (size_t i = 0; i < want.size(); ++i)
      ASSERT_NEAR(got[i], want[i], 1e-6f + 1e-5f * std::abs(want[i])) << "step " << k << ", element " << i;
  }
  EXPECT_GT(unequal, 0) << "every step's slices hold equal token counts: the test cannot tell global from local";
}

}  // namespace
}  // namespace rnn_dist

// Tests of stream mode (stream.h): the token stream restores input order across the length-sorted file,
// the plan's arithmetic, the batches of all steps and columns predict every kept stream token exactly
// once, from its predecessor, with column ranges of several ranks adding up to the whole, and the model
// over the steps with the state carried in place on the device equals the model over whole columns.
#include "rnn_dist/train/stream.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <random>


#include "rnn_dist/backends/make_backend.h"
#include "test_util.h"

namespace rnn_dist {
namespace {

class stream : public ::testing::Test {
 protected:
  void SetUp() override {
    // Sequences of random lengths whose ids encode their input position, so the stream is checkable.
    std::mt19937 rng(5);
    SequenceWriter w((dir_ / "s.h5").string(), "char");
    for (int j = 0; j < 57; ++j) {
      std::vector<int32_t> seq(2 + rng() % 9);
      for (size_t t = 0; t < seq.size(); ++t) seq[t] = kNumReserved + static_cast<int32_t>((j * 7 + t) % 20);
      expected_.insert(expected_.end(), seq.begin(), seq.end());
      w.add(seq);
    }
    std::vector<std::string> vocab = reserved_tokens();
    for (int i = 0; i < 20; ++i) vocab.push_back(std::string(1, char('a' + i)));
    w.finish(vocab);
  }
  TempDir tmp_;
  const std::filesystem::path dir_ = tmp_.path();
  std::vector<int32_t> expected_;  // the stream: all sequences in input order
};

TEST_F(stream, ReadsTheInputOrderAcrossSequenceBoundaries) {
  SequenceFile f = SequenceFile::open((dir_ / "s.h5").string());
  TokenStream s(f);
  ASSERT_EQ(s.size(), static_cast<int64_t>(expected_.size()));
  std::vector<int32_t> all;
  s.read(0, s.size(), all);
  EXPECT_EQ(all, expected_);
  for (int64_t b : {int64_t{0}, int64_t{3}, int64_t{17}, s.size() - 5}) {
    std::vector<int32_t> part;
    s.read(b, b + 5, part);
    EXPECT_EQ(part, std::vector<int32_t>(expected_.begin() + b, expected_.begin() + b + 5)) << "from " << b;
  }
  std::vector<int32_t> out;
  EXPECT_THROW(s.read(s.size() - 1, s.size() + 1, out), Error);
}

TEST(stream_plan, CutsEqualColumnsAndCountsSteps) {
  StreamPlan p = plan_stream(103, 4, 7, "f.h5");
  EXPECT_EQ(p.column_length, 25);
  EXPECT_EQ(p.dropped_tokens, 3);
  // 24 targets per column: 7 + 7 + 7 + 3.
  EXPECT_EQ(p.steps(), 4);
  EXPECT_EQ(p.step_targets(0), 7);
  EXPECT_EQ(p.step_targets(3), 3);
  EXPECT_EQ(plan_stream(29, 4, 7, "f.h5").steps(), 1);  // 7 tokens per column: one step of 6 targets
  EXPECT_NE(input_error([] { plan_stream(7, 4, 7, "f.h5"); }).find("f.h5"), std::string::npos);
}

TEST_F(stream, BatchesPredictEveryKeptTokenOnceFromItsPredecessor) {
  SequenceFile f = SequenceFile::open((dir_ / "s.h5").string());
  TokenStream s(f);
  const int world = 3, per_rank = 2;
  const StreamPlan plan = plan_stream(s.size(), world * per_rank, 4, "s.h5");
  std::vector<int> predicted(s.size(), 0);
  for (int64_t k = 0; k < plan.steps(); ++k) {
    for (int r = 0; r < world; ++r) {
      Batch b = stream_batch(s, plan, k, r * per_rank, (r + 1) * per_rank);
      ASSERT_EQ(b.packing.batch(), per_rank);
      ASSERT_EQ(b.tokens(), per_rank * plan.step_targets(k));
      for (int c = 0; c < per_rank; ++c) {
        const int64_t column = r * per_rank + c;
        for (int64_t t = 0; t < plan.step_targets(k); ++t) {
          const int64_t pos = column * plan.column_length + k * plan.bptt + t;  // the input's stream position
          const int64_t row = b.packing.row(static_cast<int>(t), c);
          EXPECT_EQ(b.inputs[row], expected_[pos]);
          EXPECT_EQ(b.targets[row], expected_[pos + 1]);
          ++predicted[pos + 1];
        }
      }
    }
  }
  // Every token of a column but its first is predicted once; the dropped tail never.
  for (int64_t p = 0; p < s.size(); ++p) {
    const bool kept = p < plan.columns * plan.column_length;
    EXPECT_EQ(predicted[p], kept && p % plan.column_length != 0 ? 1 : 0) << "stream position " << p;
  }
}

// What the trainer does with a rank's columns: one device tensor holds h then c and is both the initial and
// the final state of every step. Training and evaluation passes over the steps then give the loss and the
// final state of one pass over each column whole (up to float summation order).
TEST_F(stream, CarriedStateContinuesEachColumn) {
  SequenceFile f = SequenceFile::open((dir_ / "s.h5").string());
  TokenStream s(f);
  const int64_t first = 2, last = 5;
  const StreamPlan plan = plan_stream(s.size(), 6, 4, "s.h5");
  ASSERT_GT(plan.steps(), 3);
  auto backend = make_backend(DeviceType::cpu, 0, 1);
  ModelConfig mc;
  mc.vocab = f.vocab_size(), mc.embed = 5, mc.hidden = 6, mc.layers = 2;
  Model model(*backend, mc);
  model.init(9);
  const int64_t state = int64_t{mc.layers} * (last - first) * mc.hidden;
  std::vector<int32_t> tokens;
  s.read(first * plan.column_length, last * plan.column_length, tokens);
  const Batch whole = make_batch(tokens, std::vector<int64_t>(last - first, plan.column_length));
  Tensor final_state(*backend, {2 * state});
  const double want = model.evaluate(whole, nullptr, nullptr, final_state.data(), final_state.data() + state);
  auto host = [&](const Tensor& t) {
    std::vector<float> v(t.numel());
    backend->download(v.data(), t.data(), v.size() * sizeof(float));
    return v;
  };
  const std::vector<float> want_state = host(final_state);
  for (bool train : {true, false}) {
    Tensor carried(*backend, {2 * state});
    backend->zero(carried.data(), carried.numel());
    float *h = carried.data(), *c = carried.data() + state;
    double loss = 0;
    for (int64_t k = 0; k < plan.steps(); ++k) {
      const Batch b = stream_batch(s, plan, k, first, last);
      loss += train ? model.forward_backward(b, 1.0f, 0, h, c, h, c) : model.evaluate(b, h, c, h, c);
    }
    const char* what = train ? "training" : "evaluation";
    EXPECT_NEAR(loss, want, 1e-5 * want) << what;
    const std::vector<float> got = host(carried);
    for (size_t i = 0; i < got.size(); ++i) EXPECT_NEAR(got[i], want_state[i], 1e-5) << what << ": state " << i;
  }
}

}  // namespace
}  // namespace rnn_dist

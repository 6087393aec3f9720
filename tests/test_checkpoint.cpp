// Tests of the checkpoint's file order (checkpoint.h): a flat buffer in any layout goes to the file as the
// parameters back to back in their order and comes back into another layout; a size mismatch is refused;
// for the CPU backend the file order is its own layout (so files of earlier versions read the same); and
// an Adam state written and read back resumes exactly.
#include "rnn_dist/train/checkpoint.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "rnn_dist/backends/make_backend.h"
#include "rnn_dist/nn/backend.h"
#include "rnn_dist/util/error.h"
#include "test_util.h"

namespace rnn_dist {
namespace {

TEST(FileOrder, ReordersAnyLayoutAndBack) {
  // A layout of its own: "b" before "a", a gap of two elements, room at the end.
  const std::vector<ParamSlice> gpu_like = {{"a", 5, {2, 2}}, {"b", 0, {3}}};
  const std::vector<float> flat = {10, 11, 12, -1, -1, 1, 2, 3, 4, -1};
  const std::vector<float> file = to_file_order(flat, gpu_like);
  EXPECT_EQ(file, (std::vector<float>{1, 2, 3, 4, 10, 11, 12}));
  // Into a layout that tiles the buffer in the file's order, as the CPU's does, and back into the first.
  const std::vector<ParamSlice> cpu_like = {{"a", 0, {2, 2}}, {"b", 4, {3}}};
  EXPECT_EQ(from_file_order(file, cpu_like, 7, "x"), file);
  EXPECT_EQ(from_file_order(file, gpu_like, 10, "x"), (std::vector<float>{10, 11, 12, 0, 0, 1, 2, 3, 4, 0}));
  EXPECT_EQ(input_error([&] { from_file_order({1, 2, 3}, gpu_like, 10, "ck.h5: /optimizer/exp_avg"); }),
            "ck.h5: /optimizer/exp_avg has 3 values, the model has 7 parameters");
}

ModelConfig small_config() {
  ModelConfig c;
  c.vocab = 9;
  c.embed = 3;
  c.hidden = 5;
  c.layers = 2;
  return c;
}

TEST(FileOrder, IsTheCpuLayout) {
  auto backend = make_backend(DeviceType::cpu, 0, 1);
  Model m(*backend, small_config());
  m.init(4);
  const std::vector<float> flat = m.download_params();
  // The CPU keeps the tensors in the file's order; the file leaves out the alignment gaps between regions.
  std::vector<float> packed;
  int64_t end = 0;
  for (const ParamSlice& s : m.param_slices()) {
    EXPECT_GE(s.offset, end) << s.name;
    end = s.offset + numel_of(s.shape);
    packed.insert(packed.end(), flat.begin() + s.offset, flat.begin() + end);
  }
  EXPECT_EQ(static_cast<int64_t>(packed.size()), m.parameter_count());
  EXPECT_LT(m.parameter_count(), m.num_params());
  EXPECT_EQ(to_file_order(flat, m.param_slices()), packed);
}

TEST(Checkpoint, AdamStateResumesExactly) {
  auto backend = make_backend(DeviceType::cpu, 0, 1);
  const ModelConfig config = small_config();
  Model m(*backend, config);
  m.init(4);
  OptimizerConfig oc;  // Adam
  Optimizer opt(*backend, oc, m.num_params());
  const Batch batch = make_batch({1, 2, 3, 4, 5, 6, 7, 8, 1, 2, 3}, {6, 5});
  backend->zero(m.grads().data(), m.grads().numel());
  m.forward_backward(batch, 0.1f, 1);
  opt.step(m.params().data(), m.grads().data(), 0.01f);

  TempDir dir;
  TrainingPosition pos;
  pos.step = 1;
  write_checkpoint(dir.path(), 2, m, opt, {"char", std::vector<std::string>(config.vocab, "x"), {}, "", ""}, pos);
  const CheckpointData ck = read_checkpoint(checkpoint_path(dir.path(), 1), *backend);

  EXPECT_EQ(ck.params, m.download_params());
  EXPECT_EQ(ck.optimizer_kind, "adam");
  EXPECT_EQ(ck.optimizer_steps, 1);
  ASSERT_EQ(ck.optimizer_state.size(), opt.state().size());
  for (auto& [name, tensor] : opt.state()) {
    std::vector<float> want(tensor->numel());
    backend->download(want.data(), tensor->data(), want.size() * sizeof(float));
    bool found = false;
    for (const auto& [saved, values] : ck.optimizer_state)
      if (saved == name) {
        found = true;
        EXPECT_EQ(values, want) << name;
      }
    EXPECT_TRUE(found) << name;
  }
}

// Every field of the training position reads back as written, each with a value no other field has, so
// that writing one field under another's name (the step as step_in_epoch, say) cannot pass.
TEST(Checkpoint, EveryPositionFieldRoundTrips) {
  auto backend = make_backend(DeviceType::cpu, 0, 1);
  const ModelConfig config = small_config();
  Model m(*backend, config);
  m.init(4);
  Optimizer opt(*backend, OptimizerConfig{}, m.num_params());
  TrainingPosition pos;
  pos.step = 101;
  pos.epoch = 3;
  pos.step_in_epoch = 11;
  pos.validated = false;
  pos.seed = 977;
  pos.plateau_factor = 0.25;
  pos.best_loss = 2.5;
  pos.best_objective = 0.375;
  pos.plan = "packed sequences=24";
  pos.steps_per_epoch = 45;
  pos.epoch_rows = 1234;
  const int64_t columns = 2;
  pos.stream_state.resize(size_t(2 * config.layers * columns * config.hidden));
  for (size_t i = 0; i < pos.stream_state.size(); ++i) pos.stream_state[i] = 0.5f + float(i);
  TempDir dir;
  write_checkpoint(dir.path(), 2, m, opt, {"char", std::vector<std::string>(config.vocab, "x"), {}, "", ""}, pos);
  const TrainingPosition got = read_checkpoint(checkpoint_path(dir.path(), pos.step), *backend).position;
  EXPECT_EQ(got.step, 101);
  EXPECT_EQ(got.epoch, 3);
  EXPECT_EQ(got.step_in_epoch, 11);
  EXPECT_FALSE(got.validated);
  EXPECT_EQ(got.seed, 977u);
  EXPECT_EQ(got.plateau_factor, 0.25);
  EXPECT_EQ(got.best_loss, 2.5);
  EXPECT_EQ(got.best_objective, 0.375);
  EXPECT_EQ(got.plan, "packed sequences=24");
  EXPECT_EQ(got.steps_per_epoch, 45);
  EXPECT_EQ(got.epoch_rows, 1234);
  EXPECT_EQ(got.stream_state, pos.stream_state);
}

}  // namespace
}  // namespace rnn_dist

// Optimizer steps against values computed by hand from torch.optim's formulas, clipping, and schedules.
#include <gtest/gtest.h>

#include <cmath>

#include "rnn_dist/backends/make_backend.h"
#include "rnn_dist/nn/backend.h"
#include "rnn_dist/nn/optimizer.h"
#include "rnn_dist/util/error.h"

namespace rnn_dist {
namespace {

struct Fixture {
  std::unique_ptr<Backend> backend = make_backend(DeviceType::cpu, 0, 1);
};

TEST(Optimizer, SgdWithMomentumAndWeightDecay) {
  Fixture f;
  Optimizer opt(*f.backend, {"sgd", 0.1f, 0.9f, 0.01f}, 1);
  float p = 1.0f, g = 0.5f;
  opt.step(&p, &g, 0.1f);  // d = 0.5 + 0.01 = 0.51; v = 0.51; p = 1 - 0.051
  EXPECT_NEAR(p, 0.949f, 1e-6);
  opt.step(&p, &g, 0.1f);  // d = 0.5 + 0.00949 = 0.50949; v = 0.9*0.51 + 0.50949 = 0.96849; p -= 0.096849
  EXPECT_NEAR(p, 0.949f - 0.096849f, 1e-6);
}

TEST(Optimizer, AdamFirstStepsByHand) {
  Fixture f;
  Optimizer opt(*f.backend, {"adam", 0.01f}, 2);
  float p[2] = {1.0f, -2.0f}, g[2] = {0.3f, -4.0f};
  opt.step(p, g, 0.01f);  // first step: m_hat = g, v_hat = g^2, update = lr * g/(|g| + eps) ~ lr * sign(g)
  EXPECT_NEAR(p[0], 1.0f - 0.01f, 1e-6);
  EXPECT_NEAR(p[1], -2.0f + 0.01f, 1e-6);
  float g2[2] = {0.1f, 0.0f};
  opt.step(p, g2, 0.01f);
  // m = 0.9*0.03 + 0.1*0.1 ... computed in double for the first element:
  const double m = 0.9 * 0.1 * 0.3 + 0.1 * 0.1, v = 0.999 * 0.001 * 0.09 + 0.001 * 0.01;
  const double upd = 0.01 / (1 - 0.81) * m / (std::sqrt(v / (1 - 0.998001)) + 1e-8);
  EXPECT_NEAR(p[0], 0.99 - upd, 1e-6);
  EXPECT_EQ(opt.steps(), 2);
}

TEST(Optimizer, AdamWDecaysDirectlyAndAdamThroughTheGradient) {
  Fixture f;
  Optimizer adamw(*f.backend, {"adamw", 0.1f, 0.0f, 0.5f}, 1), adam(*f.backend, {"adam", 0.1f, 0.0f, 0.5f}, 1);
  float p1 = 2.0f, p2 = 2.0f, g = 1.0f;
  adamw.step(&p1, &g, 0.1f);  // p = 2 - 0.1*0.5*2 = 1.9, then - 0.1 * sign(1)
  adam.step(&p2, &g, 0.1f);   // g' = 1 + 0.5*2 = 2, update = 0.1 * sign(2)
  EXPECT_NEAR(p1, 1.8f, 1e-6);
  EXPECT_NEAR(p2, 1.9f, 1e-6);
}

TEST(Optimizer, RejectsUnknownKind) {
  Fixture f;
  EXPECT_THROW(Optimizer(*f.backend, {"rmsprop"}, 1), InputError);
}

TEST(Clip, FactorMatchesClipGradNorm) {
  EXPECT_EQ(clip_factor(0.5, 1.0f), 1.0f);
  EXPECT_EQ(clip_factor(10.0, 0.0f), 1.0f);  // off
  EXPECT_NEAR(clip_factor(4.0, 1.0f), 0.25f, 1e-6);
}

TEST(Schedule, ConstantStepCosineWarmupPlateau) {
  EXPECT_FLOAT_EQ(LrSchedule({"constant"}, 0.1f, 100).lr(50, 3), 0.1f);
  LrSchedule step({"step", 0.5f, 2}, 1.0f, 100);
  EXPECT_FLOAT_EQ(step.lr(0, 1), 1.0f);
  EXPECT_FLOAT_EQ(step.lr(0, 2), 0.5f);
  EXPECT_FLOAT_EQ(step.lr(0, 4), 0.125f);
  LrSchedule cosine({"cosine", 0.5f, 2, 10}, 1.0f, 110);
  EXPECT_FLOAT_EQ(cosine.lr(0, 1), 0.1f);   // warm-up 1/10
  EXPECT_FLOAT_EQ(cosine.lr(9, 1), 1.0f);   // end of warm-up
  EXPECT_NEAR(cosine.lr(60, 1), 0.5f, 1e-6);  // half-way through the cosine
  EXPECT_NEAR(cosine.lr(110, 1), 0.0f, 1e-6);
  LrSchedule plateau({"plateau", 0.25f}, 1.0f, 100);
  plateau.on_validation(2.0);
  EXPECT_FLOAT_EQ(plateau.lr(0, 1), 1.0f);
  plateau.on_validation(1.5);
  EXPECT_FLOAT_EQ(plateau.lr(0, 1), 1.0f);
  plateau.on_validation(1.6);  // no improvement
  EXPECT_FLOAT_EQ(plateau.lr(0, 1), 0.25f);
  // Decays compound (issue 27 #3): two more non-improving validations make 0.25^3, an improvement keeps it.
  plateau.on_validation(1.5);  // equal is no improvement
  plateau.on_validation(1.7);
  EXPECT_FLOAT_EQ(plateau.lr(0, 1), 0.25f * 0.25f * 0.25f);
  plateau.on_validation(1.4);
  EXPECT_FLOAT_EQ(plateau.lr(0, 1), 0.25f * 0.25f * 0.25f);
  // A schedule rebuilt from a checkpoint's fields (the trainer's --resume) goes on from there.
  LrSchedule resumed({"plateau", 0.25f}, 1.0f, 100);
  resumed.plateau_factor = plateau.plateau_factor;
  resumed.best_loss = plateau.best_loss;
  resumed.on_validation(1.45);
  EXPECT_FLOAT_EQ(resumed.lr(0, 1), 0.25f * 0.25f * 0.25f * 0.25f);
  EXPECT_THROW(LrSchedule({"linear"}, 1.0f, 1), InputError);
  EXPECT_THROW(LrSchedule({"step", 1.5f}, 1.0f, 1), InputError);
}

// --plateau-threshold 0.1: a validation counts as better only below 90% of the best, and one that is lower
// but not by that much leaves the best where it was (as torch's threshold_mode rel), so small steps down
// cannot creep the best along.
TEST(Schedule, PlateauThresholdIsRelativeToTheBest) {
  LrSchedule plateau({"plateau", 0.5f, 2, 0, 0.1f}, 1.0f, 100);
  plateau.on_validation(10.0);
  EXPECT_FLOAT_EQ(plateau.lr(0, 1), 1.0f);
  plateau.on_validation(9.5);  // lower, not 10% lower
  EXPECT_FLOAT_EQ(plateau.lr(0, 1), 0.5f);
  EXPECT_EQ(plateau.best_loss, 10.0);
  plateau.on_validation(9.05);  // 9.05 > 9.0: still not below 90% of 10
  EXPECT_FLOAT_EQ(plateau.lr(0, 1), 0.25f);
  plateau.on_validation(8.9);
  EXPECT_FLOAT_EQ(plateau.lr(0, 1), 0.25f);
  EXPECT_EQ(plateau.best_loss, 8.9);
  EXPECT_THROW(LrSchedule({"plateau", 0.5f, 2, 0, 1.0f}, 1.0f, 1), InputError);
  EXPECT_THROW(LrSchedule({"plateau", 0.5f, 2, 0, -0.1f}, 1.0f, 1), InputError);
}

}  // namespace
}  // namespace rnn_dist

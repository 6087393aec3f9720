// Tests of the collectives' deadline (watchdog.h): an armed watchdog that runs out prints one line naming
// the rank, the step (when there is one) and the collective and exits with status 3; disarming in time,
// re-arming (which restarts the clock), the grace and a margin keep the process alive.
#include "rnn_dist/dist/watchdog.h"

#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>
#include <thread>

namespace rnn_dist {
namespace {

void sleep_s(double s) { std::this_thread::sleep_for(std::chrono::duration<double>(s)); }

TEST(WatchdogDeathTest, EndsTheProcessWhenACollectiveOverruns) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(
      {
        Watchdog w(0.2, 0.0, "rank 3 (host n17)");
        w.arm("the gradient all-reduce", 7);
        sleep_s(5);
      },
      testing::ExitedWithCode(3),
      "rnn_dist: error: rank 3 \\(host n17\\): step 7: the gradient all-reduce did not complete within 0.2 s");
}

// The overlapped all-reduce arms it per group of buckets (GradientReducer): the message names them.
TEST(WatchdogDeathTest, TheMessageNamesTheBuckets) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(
      {
        Watchdog w(0.2, 0.0, "rank 0 (host n1)");
        w.arm("the gradient all-reduce", 4, 0, 2, 3, 5);
        sleep_s(5);
      },
      testing::ExitedWithCode(3),
      "rank 0 \\(host n1\\): step 4: buckets 2-3 of 5 of the gradient all-reduce did not complete within 0.2 s");
  EXPECT_EXIT(
      {
        Watchdog w(0.2, 0.0, "rank 0 (host n1)");
        w.arm("the gradient all-reduce", 4, 0, 5, 5, 5);
        sleep_s(5);
      },
      testing::ExitedWithCode(3), "step 4: bucket 5 of 5 of the gradient all-reduce did not complete");
}

TEST(WatchdogDeathTest, BeforeTheFirstStepTheMessageNamesNoStep) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(
      {
        Watchdog w(0.2, 0.0, "rank 0 (host n1)");
        w.arm("the set-up of the communicators", 0);
        sleep_s(5);
      },
      testing::ExitedWithCode(3),
      "rnn_dist: error: rank 0 \\(host n1\\): the set-up of the communicators did not complete within 0.2 s");
}

// A margin (what the trainer gives NCCL's own deadline) lengthens the limit, and the message says so.
TEST(WatchdogDeathTest, AMarginLengthensTheLimit) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(
      {
        Watchdog w(0.2, 0.0, "rank 0");
        w.arm("the gradient all-reduce", 3, 0.6);
        sleep_s(0.4);  // past the plain limit: still alive
        std::fputs("past the plain limit\n", stderr);
        sleep_s(5);
      },
      testing::ExitedWithCode(3),
      "past the plain limit\n.*step 3: the gradient all-reduce did not complete within 0.8 s");
}

// The margins are wide (0.4 s and more), so that a loaded machine's scheduling delays cannot end the test.
TEST(Watchdog, DisarmedInTimeItStaysQuiet) {
  Watchdog w(1.0, 0.0, "rank 0");
  for (int step = 0; step < 3; ++step) {
    w.arm("a collective", 1);
    sleep_s(0.05);
    w.disarm();
  }
  sleep_s(1.5);  // past the limit, disarmed: still alive
  SUCCEED();
}

TEST(Watchdog, ReArmingRestartsTheClock) {
  Watchdog w(1.0, 0.0, "rank 0");
  w.arm("first", 1);
  sleep_s(0.6);
  w.arm("second", 2);  // 1.2 s since the first arm() in all, 0.6 s since this one
  sleep_s(0.6);
  w.disarm();
  SUCCEED();
}

TEST(Watchdog, GraceExtendsTheLimit) {
  Watchdog w(0.3, 1.5, "rank 1");
  w.arm("a collective", 1);
  sleep_s(0.8);  // past the limit, within limit + grace
  w.disarm();
  SUCCEED();
}

}  // namespace
}  // namespace rnn_dist

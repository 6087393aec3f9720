// Tests of the trainer's read-ahead (read_ahead.h): batches come back for the step requested, loaded on
// another thread while the caller goes on; a load's error reaches take() and the reader keeps working;
// misuse is refused; idle() and the destructor wait for a load in progress.
#include "rnn_dist/train/read_ahead.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <future>
#include <stdexcept>
#include <thread>

#include "rnn_dist/util/error.h"
#include "test_util.h"

namespace rnn_dist {
namespace {

// A step's batch that names its step: inputs = {k}.
StepBatch batch_of(int64_t k) {
  StepBatch b;
  b.batch.inputs = {static_cast<int32_t>(k)};
  return b;
}

TEST(ReadAhead, ReturnsTheRequestedStepsInTurn) {
  ReadAhead reader(batch_of);
  for (int64_t k : {3, 4, 0, 7}) {
    reader.request(k);
    EXPECT_EQ(reader.take().batch.inputs, std::vector<int32_t>{static_cast<int32_t>(k)});
  }
}

TEST(ReadAhead, LoadsOnAnotherThreadWhileTheCallerGoesOn) {
  std::promise<void> release;
  std::shared_future<void> released = release.get_future().share();
  std::atomic<std::thread::id> loader{};
  ReadAhead reader([&](int64_t k) {
    loader = std::this_thread::get_id();
    // The load cannot finish before the caller releases it, so a request() that loaded in the caller's
    // thread would wait here: it fails after a while instead of hanging.
    if (released.wait_for(std::chrono::seconds(10)) != std::future_status::ready)
      throw std::runtime_error("request() waited for the load");
    return batch_of(k);
  });
  reader.request(5);
  release.set_value();
  EXPECT_EQ(reader.take().batch.inputs, std::vector<int32_t>{5});
  EXPECT_NE(loader.load(), std::this_thread::get_id());
}

TEST(ReadAhead, ALoadErrorReachesTakeAndTheReaderGoesOn) {
  ReadAhead reader([](int64_t k) {
    if (k == 2) throw InputError("data.h5: sequence 2 is damaged");
    return batch_of(k);
  });
  reader.request(2);
  EXPECT_EQ(input_error([&] { reader.take(); }), "data.h5: sequence 2 is damaged");
  reader.request(3);
  EXPECT_EQ(reader.take().batch.inputs, std::vector<int32_t>{3});
}

TEST(ReadAhead, MisuseIsRefused) {
  ReadAhead reader(batch_of);
  EXPECT_THROW(reader.take(), Error);
  reader.request(1);
  EXPECT_THROW(reader.request(2), Error);  // the batch of step 1 has not been taken
  EXPECT_EQ(reader.take().batch.inputs, std::vector<int32_t>{1});
}

TEST(ReadAhead, IdleAndTheDestructorWaitForTheLoadInProgress) {
  std::atomic<int> finished{0};
  auto slow = [&](int64_t k) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    ++finished;
    return batch_of(k);
  };
  {
    ReadAhead reader(slow);
    reader.request(8);
    reader.idle();
    EXPECT_EQ(finished.load(), 1);
    EXPECT_EQ(reader.take().batch.inputs, std::vector<int32_t>{8});  // idle() leaves the batch for take()
    reader.request(9);
  }  // destroyed while step 9 loads
  EXPECT_EQ(finished.load(), 2);
}

}  // namespace
}  // namespace rnn_dist

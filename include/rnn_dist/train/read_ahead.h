// The trainer's read-ahead: one background thread for the whole run loads the step the training loop
// asks for next while the current step computes (a thread started per step would cost a thread start
// every step). One request at a time: request(k), then take().
#pragma once

#include <condition_variable>
#include <cstdint>
#include <exception>
#include <functional>
#include <mutex>
#include <optional>
#include <thread>
#include <vector>

#include "rnn_dist/nn/model.h"

namespace rnn_dist {

// A step's batch as the reader thread loads it: with gradient accumulation also cut there into its
// micro-batches (split_batch), so that the training thread allocates none of them.
struct StepBatch {
  Batch batch;
  std::vector<Batch> parts;  // empty: the batch goes through in one pass
};

class ReadAhead {
 public:
  // load(k) runs on the reader thread; what it reads must not change while a load is running.
  explicit ReadAhead(std::function<StepBatch(int64_t)> load);
  ~ReadAhead();  // waits for the load in progress, if any
  ReadAhead(const ReadAhead&) = delete;
  ReadAhead& operator=(const ReadAhead&) = delete;

  // Starts loading step k. Throws Error if the previous request has not been taken.
  void request(int64_t k);
  // The requested batch, once loaded; rethrows the error of its load. Throws Error without a request.
  StepBatch take();
  // Returns when no load is running, so that the caller may use HDF5 itself (a build of HDF5 without
  // thread safety allows one thread in the library). A loaded batch stays for take().
  void idle();

 private:
  void serve();

  std::function<StepBatch(int64_t)> load_;
  std::mutex m_;
  std::condition_variable cv_;
  std::optional<int64_t> want_;  // requested and not loaded yet
  std::optional<StepBatch> ready_;
  std::exception_ptr error_;
  bool quit_ = false;
  std::thread thread_;  // last: starts once the members above exist
};

}  // namespace rnn_dist

// ReadAhead (see read_ahead.h): a request slot and a result slot under one mutex, served by one thread.
#include "rnn_dist/train/read_ahead.h"

#include <utility>

#include "rnn_dist/util/error.h"

namespace rnn_dist {

ReadAhead::ReadAhead(std::function<StepBatch(int64_t)> load) : load_(std::move(load)), thread_([this] { serve(); }) {}

ReadAhead::~ReadAhead() {
  {
    std::lock_guard lock(m_);
    quit_ = true;
  }
  cv_.notify_all();
  thread_.join();
}

void ReadAhead::request(int64_t k) {
  {
    std::lock_guard lock(m_);
    if (want_ || ready_ || error_) throw Error("ReadAhead: a batch was requested before the previous one was taken");
    want_ = k;
  }
  cv_.notify_all();
}

StepBatch ReadAhead::take() {
  std::unique_lock lock(m_);
  cv_.wait(lock, [&] { return !want_; });
  if (error_) std::rethrow_exception(std::exchange(error_, nullptr));
  if (!ready_) throw Error("ReadAhead: take() without a request");
  StepBatch b = std::move(*ready_);
  ready_.reset();
  return b;
}

void ReadAhead::idle() {
  std::unique_lock lock(m_);
  cv_.wait(lock, [&] { return !want_; });
}

void ReadAhead::serve() {
  std::unique_lock lock(m_);
  for (;;) {
    cv_.wait(lock, [&] { return quit_ || want_; });
    if (!want_) return;  // quit, with nothing left to load
    const int64_t k = *want_;
    lock.unlock();
    std::optional<StepBatch> batch;
    std::exception_ptr error;
    try {
      batch = load_(k);
    } catch (...) {
      error = std::current_exception();
    }
    lock.lock();
    ready_ = std::move(batch);
    error_ = error;
    want_.reset();
    cv_.notify_all();
  }
}

}  // namespace rnn_dist

// GradientReducer (see gradient_reducer.h): the buckets' bookkeeping and the communication thread.
#include "rnn_dist/dist/gradient_reducer.h"

#include <algorithm>

#include "rnn_dist/util/error.h"

namespace rnn_dist {

GradientReducer::GradientReducer(Topology& topo, Tensor& scratch, const Options& options, Watchdog* watchdog,
                                 double margin)
    : topo_(topo), scratch_(scratch), options_(options), watchdog_(watchdog), margin_(margin) {
  if (options_.bucket_elems < 1) throw Error(cat("GradientReducer: bucket of ", options_.bucket_elems, " elements"));
  if (!options_.overlap || topo_.world_size() == 1) return;
  if (!mpi_threads_serialized())
    throw InputError("--overlap on: this MPI library does not allow a communication thread (thread level "
                     "\"serialized\"); use --overlap off");
  thread_ = std::thread([this] { communicate(); });
}

GradientReducer::~GradientReducer() {
  if (!thread_.joinable()) return;
  {
    std::lock_guard lock(m_);
    quit_ = true;
  }
  cv_.notify_all();
  thread_.join();
}

int GradientReducer::buckets(int64_t n) const {
  if (!thread_.joinable()) return 1;
  return static_cast<int>(std::max<int64_t>(1, (n + options_.bucket_elems - 1) / options_.bucket_elems));
}

void GradientReducer::begin(float* data, int64_t n, int64_t step) {
  std::lock_guard lock(m_);
  if (sent_ != done_) throw Error("GradientReducer::begin while buckets of the last step are outstanding");
  data_ = data, n_ = n, step_ = step;
  parts_ = buckets(n);
  sent_ = done_ = next_group_ = 0;
  groups_.clear();
  // While the thread works beside compute its collectives sleep between tests rather than spin on a core
  // the compute threads need; the main thread's own collectives, outside begin()..finish(), spin.
  if (thread_.joinable()) set_wait(Communicator::Wait::sleep);
  if (static_cast<int>(lead_sum_.size()) != parts_) {
    lead_sum_.assign(static_cast<size_t>(parts_), 0.0);
    done_sum_.assign(static_cast<size_t>(parts_), 0.0);
    sent_at_.resize(static_cast<size_t>(parts_));
    done_at_.resize(static_cast<size_t>(parts_));
    groups_.reserve(static_cast<size_t>(parts_));  // no allocation in later steps
    steps_ = 0;
  }
  error_ = nullptr;
}

void GradientReducer::final_from(int64_t offset) {
  if (!thread_.joinable()) return;
  {
    std::lock_guard lock(m_);
    const int before = sent_;
    while (sent_ < parts_ && bucket_begin(sent_) >= offset) ++sent_;
    if (sent_ == before) return;
    const auto now = std::chrono::steady_clock::now();
    for (int b = before; b < sent_; ++b) sent_at_[static_cast<size_t>(b)] = now;
    groups_.push_back(sent_);
  }
  cv_.notify_all();
}

void GradientReducer::finish() {
  if (!thread_.joinable()) {
    issue(0, n_, 0, 0);
    return;
  }
  const auto end = std::chrono::steady_clock::now();
  final_from(0);
  std::unique_lock lock(m_);
  cv_.wait(lock, [&] { return done_ == sent_ || error_; });
  set_wait(Communicator::Wait::spin);
  if (error_) {
    // The thread has stopped: what it had not summed is abandoned with the step.
    sent_ = done_;
    std::rethrow_exception(error_);
  }
  for (size_t b = 0; b < static_cast<size_t>(parts_); ++b) {
    lead_sum_[b] += std::chrono::duration<double>(end - sent_at_[b]).count();
    done_sum_[b] += std::chrono::duration<double>(done_at_[b] - end).count();
  }
  ++steps_;
}

void GradientReducer::set_wait(Communicator::Wait wait) {
  for (Communicator* c : {topo_.world.get(), topo_.node.get(), topo_.cross.get()}) c->set_wait(wait);
}

std::vector<double> GradientReducer::mean_lead_seconds() const {
  std::vector<double> out(lead_sum_.size(), 0.0);
  for (size_t b = 0; b < out.size() && steps_ > 0; ++b) out[b] = std::max(0.0, lead_sum_[b] / double(steps_));
  return out;
}

std::vector<double> GradientReducer::mean_done_seconds() const {
  std::vector<double> out(done_sum_.size(), 0.0);
  for (size_t b = 0; b < out.size() && steps_ > 0; ++b) out[b] = done_sum_[b] / double(steps_);
  return out;
}

void GradientReducer::complete() {
  if (!thread_.joinable() && topo_.world_size() > 1) wait_issued();
}

// A single rank sums nothing: its values are not even rounded to bfloat16.
void GradientReducer::issue(int64_t begin, int64_t end, int first, int last) {
  if (topo_.world_size() == 1 || end <= begin) return;
  if (watchdog_) watchdog_->arm("the gradient all-reduce", step_, margin_, first + 1, last + 1, parts_);
  try {
    allreduce_sum(topo_, options_.algo, data_ + begin, end - begin, scratch_, options_.wire);
  } catch (...) {
    disarm();
    throw;
  }
}

void GradientReducer::reduce(int64_t begin, int64_t end, int first, int last) {
  if (topo_.world_size() == 1 || end <= begin) return;
  issue(begin, end, first, last);
  wait_issued();
}

void GradientReducer::wait_issued() {
  try {
    topo_.world->complete("all-reduce");
  } catch (...) {
    disarm();
    throw;
  }
  disarm();
}

void GradientReducer::disarm() {
  if (watchdog_) watchdog_->disarm();
}

void GradientReducer::communicate() {
  std::unique_lock lock(m_);
  for (;;) {
    cv_.wait(lock, [&] { return quit_ || (done_ < sent_ && !error_); });
    if (quit_) return;
    // The buckets of one final_from() call go together, in one all-reduce: they are contiguous and were
    // final at once, and one call pays one latency. The grouping follows the backward pass alone, so every
    // rank issues the same all-reduces (as MPI requires) and every run the same (as --deterministic does).
    const int first = done_, last = groups_[static_cast<size_t>(next_group_++)] - 1;
    const int64_t begin = bucket_begin(last), end = bucket_end(first);
    lock.unlock();
    std::exception_ptr error;
    try {
      reduce(begin, end, first, last);
    } catch (...) {
      error = std::current_exception();
    }
    lock.lock();
    if (error) {
      error_ = error;
    } else {
      const auto now = std::chrono::steady_clock::now();
      for (int b = first; b <= last; ++b) done_at_[static_cast<size_t>(b)] = now;
      done_ = last + 1;
    }
    cv_.notify_all();
  }
}

}  // namespace rnn_dist

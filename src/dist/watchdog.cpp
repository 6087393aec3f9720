// Watchdog (see watchdog.h): one thread that sleeps until the armed deadline or a change of state.
#include "rnn_dist/dist/watchdog.h"

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <iostream>
#include <utility>

#include "rnn_dist/util/error.h"

namespace rnn_dist {

Watchdog::Watchdog(double seconds, double grace, std::string who)
    : seconds_(seconds), grace_(grace), who_(std::move(who)), thread_([this] { watch(); }) {}

double Watchdog::grace_of(int world_rank, double seconds) { return world_rank == 0 ? 0.0 : std::min(10.0, seconds); }

Watchdog::~Watchdog() {
  {
    std::lock_guard lock(m_);
    quit_ = true;
  }
  cv_.notify_all();
  thread_.join();
}

void Watchdog::arm(const char* what, int64_t step, double margin, int first, int last, int parts) {
  {
    std::lock_guard lock(m_);
    what_ = what;
    step_ = step;
    margin_ = margin;
    first_ = first;
    last_ = last;
    parts_ = parts;
    armed_ = true;
    ++generation_;
  }
  cv_.notify_all();
}

void Watchdog::disarm() {
  {
    std::lock_guard lock(m_);
    armed_ = false;
  }
  cv_.notify_all();
}

void Watchdog::watch() {
  std::unique_lock lock(m_);
  while (!quit_) {
    if (!armed_) {
      cv_.wait(lock, [&] { return quit_ || armed_; });
      continue;
    }
    const unsigned long armed_as = generation_;
    const double limit = seconds_ + margin_;
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(limit + grace_);
    if (cv_.wait_until(lock, deadline, [&] { return quit_ || !armed_ || generation_ != armed_as; })) continue;
    // Not std::exit: the main thread is blocked inside MPI, and only an exit without clean-up is safe.
    std::cerr << "rnn_dist: error: " << who_ << ": " << (step_ > 0 ? cat("step ", step_, ": ") : "")
              << (parts_ <= 1     ? std::string()
                  : first_ == last_ ? cat("bucket ", first_, " of ", parts_, " of ")
                                    : cat("buckets ", first_, "-", last_, " of ", parts_, " of "))
              << what_
              << " did not complete within " << limit
              << " s: a peer rank has probably died or hangs (--comm-timeout); ending the job" << std::endl;
    std::_Exit(3);
  }
}

}  // namespace rnn_dist

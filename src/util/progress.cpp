// Progress lines (see progress.h).
#include "rnn_dist/util/progress.h"

#include <unistd.h>

#include <iostream>
#include <sstream>

namespace rnn_dist {

namespace {

constexpr auto kTtyEvery = std::chrono::milliseconds(250);
constexpr auto kLogEvery = std::chrono::seconds(30);  // logs of short runs get no progress lines at all

std::string amount(double v, const std::string& unit) {
  std::ostringstream s;
  s.setf(std::ios::fixed);
  if (unit == "bytes") {
    s.precision(1);
    if (v >= 1e9)
      s << v / 1e9 << " GB";
    else if (v >= 1e6)
      s << v / 1e6 << " MB";
    else
      s << v / 1e3 << " kB";
  } else {
    s.precision(0), s << v << " " << unit;
  }
  return s.str();
}

}  // namespace

Progress::Progress(std::string what, double total, std::string unit, bool quiet)
    : what_(std::move(what)), unit_(std::move(unit)), total_(total), quiet_(quiet), tty_(isatty(STDERR_FILENO) == 1),
      start_(Clock::now()), next_(start_ + (tty_ ? std::chrono::duration_cast<Clock::duration>(kTtyEvery)
                                                 : std::chrono::duration_cast<Clock::duration>(kLogEvery))) {}

Progress::~Progress() {
  try {
    finish();
  } catch (...) {
  }
}

std::string Progress::line(double seconds) const {
  std::ostringstream s;
  s << what_ << ": ";
  if (total_ <= 0)
    s << amount(done_, unit_);
  else if (unit_ == "bytes")
    s << amount(done_, unit_) << " of " << amount(total_, unit_);
  else  // "12 of 50 sequences"
    s << static_cast<int64_t>(done_) << " of " << amount(total_, unit_);
  if (total_ > 0) s << " (" << static_cast<int>(100 * done_ / total_) << "%)";
  if (seconds > 0) {
    const double rate = done_ / seconds;
    s << ", " << amount(rate, unit_) << "/s";
    if (total_ > 0 && rate > 0 && done_ < total_) s << ", ETA " << static_cast<int64_t>((total_ - done_) / rate + 0.5) << " s";
  }
  return s.str();
}

void Progress::print(bool last) {
  const double seconds = std::chrono::duration<double>(Clock::now() - start_).count();
  if (tty_)  // \033[K clears what a longer earlier line left
    std::cerr << "\r" << line(seconds) << "\033[K" << (last ? "\n" : "") << std::flush;
  else
    std::cerr << line(seconds) << "\n" << std::flush;
}

void Progress::update(double done) {
  done_ = done;
  if (quiet_ || finished_) return;
  const Clock::time_point now = Clock::now();
  if (now < next_) return;
  next_ = now + (tty_ ? std::chrono::duration_cast<Clock::duration>(kTtyEvery)
                      : std::chrono::duration_cast<Clock::duration>(kLogEvery));
  print(false);
}

void Progress::finish() {
  if (finished_) return;
  finished_ = true;
  if (!quiet_ && tty_) print(true);  // the pass's total and rate stay on the terminal
}

}  // namespace rnn_dist

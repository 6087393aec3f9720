// Progress of a long pass, for people at a terminal: on stderr (stdout keeps the results), one line
// rewritten in place when stderr is a terminal, a plain line every 30 s otherwise, nothing when quiet.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>

namespace rnn_dist {

class Progress {
 public:
  // what: "rnn_prep: encoding"; total: the amount that ends the pass, 0 when unknown; unit: "bytes" (shown
  // as kB, MB or GB) or a noun such as "sequences".
  Progress(std::string what, double total, std::string unit, bool quiet);
  ~Progress();  // ends the terminal line (never throws)
  Progress(const Progress&) = delete;
  Progress& operator=(const Progress&) = delete;

  // Records how far the pass is; prints when due (a clock read per call, a line at most 4 times a second).
  void update(double done);
  // Ends the pass: on a terminal its final line (total and rate) stays.
  void finish();

 private:
  using Clock = std::chrono::steady_clock;
  std::string line(double seconds) const;
  void print(bool last);

  std::string what_, unit_;
  double total_ = 0, done_ = 0;
  bool quiet_ = false, tty_ = false, finished_ = false;
  Clock::time_point start_, next_;
};

}  // namespace rnn_dist

// Error types shared by every part of rnn_dist: InputError for what the user can fix (exit code 2),
// plain Error for everything else (exit code 1), and cat() to build one-line messages.
#pragma once

#include <sstream>
#include <stdexcept>
#include <string>
#include <utility>

namespace rnn_dist {

// Joins its arguments with operator<< into one string.
template <class... Args>
std::string cat(Args&&... args) {
  std::ostringstream os;
  (os << ... << std::forward<Args>(args));
  return os.str();
}

class Error : public std::runtime_error {
 public:
  explicit Error(const std::string& what, int exit_code = 1) : std::runtime_error(what), exit_code_(exit_code) {}
  int exit_code() const { return exit_code_; }

 private:
  int exit_code_;
};

// Bad options, files or records: the message names the culprit; the program exits with code 2.
class InputError : public Error {
 public:
  explicit InputError(const std::string& what) : Error(what, 2) {}
};

}  // namespace rnn_dist

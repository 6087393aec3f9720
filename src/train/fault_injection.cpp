// RNN_DIST_TEST_FAIL (see fault_injection.h).
#include "rnn_dist/train/fault_injection.h"

#include <unistd.h>

#include <cctype>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "rnn_dist/util/error.h"

namespace rnn_dist {

namespace {
// The spec's fault for this rank at `at` ("" when it names another rank or point), as in the header.
std::string fault_at(int rank, const char* at) {
  static const char* spec = std::getenv("RNN_DIST_TEST_FAIL");
  if (!spec) return "";
  int r = -1;
  char where[16] = "", how[8] = "";
  if (std::sscanf(spec, "%d:%15[^:]:%7s", &r, where, how) < 2 || r != rank || std::strcmp(where, at) != 0) return "";
  return *how ? how : "throw";
}

std::string step_name(int64_t step) {
  char at[24];
  std::snprintf(at, sizeof(at), "%lld", static_cast<long long>(step));
  return at;
}
}  // namespace

void injected_failure(int rank, const char* at) {
  const std::string how = fault_at(rank, at);
  if (how.empty() || how == "nan") return;
  if (how == "kill") std::raise(SIGKILL);
  if (how == "hang")
    for (;;) pause();
  const bool step = std::isdigit(static_cast<unsigned char>(*at));
  throw Error(cat("RNN_DIST_TEST_FAIL: injected failure at ", step ? "step " : "", at));
}

void injected_failure(int rank, int64_t step) {
  if (std::getenv("RNN_DIST_TEST_FAIL")) injected_failure(rank, step_name(step).c_str());
}

bool injected_nan(int rank, int64_t step) {
  return std::getenv("RNN_DIST_TEST_FAIL") && fault_at(rank, step_name(step).c_str()) == "nan";
}

}  // namespace rnn_dist

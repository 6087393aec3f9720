// Replays every input under tests/data/fuzz/ through the fuzz harnesses (fuzz/harness.h), so the normal
// build checks what the libFuzzer targets found. tests/data/fuzz/records/ holds fuzz_records inputs and
// tests/data/fuzz/sequence_file/ fuzz_sequence_file inputs; a name starting with "valid-" must be
// accepted, "malformed-" rejected with an rnn_dist::Error, and any other (crash-*: a fuzzer finding) just
// handled: no crash, no exception other than rnn_dist::Error, no broken invariant.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <string>
#include <vector>

#include "../fuzz/harness.h"

namespace {

namespace fs = std::filesystem;

std::vector<fs::path> inputs(const std::string& target) {
  std::vector<fs::path> out;
  for (const auto& e : fs::directory_iterator(fs::path(RNN_DIST_TEST_DATA_DIR) / "fuzz" / target))
    if (e.is_regular_file()) out.push_back(e.path());
  std::sort(out.begin(), out.end());
  return out;
}

template <class Harness>
void replay(const std::string& target, Harness&& harness) {
  const std::vector<fs::path> files = inputs(target);
  int valid = 0, malformed = 0;
  for (const fs::path& path : files) {
    SCOPED_TRACE(path.string());
    const std::string bytes = rnn_dist::fuzz::read_file(path.string());
    const std::string name = path.filename().string();
    bool accepted = false;
    EXPECT_NO_THROW(accepted = harness(std::span(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size())));
    if (name.starts_with("valid-")) {
      EXPECT_TRUE(accepted) << "a valid- input was rejected";
      ++valid;
    } else if (name.starts_with("malformed-")) {
      EXPECT_FALSE(accepted) << "a malformed- input was accepted";
      ++malformed;
    }
  }
  // The mechanism needs inputs of both kinds to mean anything.
  EXPECT_GT(valid, 0) << "no valid- inputs for " << target;
  EXPECT_GT(malformed, 0) << "no malformed- inputs for " << target;
}

TEST(fuzz_regressions, records_and_tokenizers) { replay("records", rnn_dist::fuzz::records_and_tokenizers); }

TEST(fuzz_regressions, sequence_file) { replay("sequence_file", rnn_dist::fuzz::sequence_file); }

}  // namespace

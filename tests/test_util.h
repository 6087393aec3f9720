// Helpers shared by the GoogleTest files.
#pragma once

#include <gtest/gtest.h>
#include <stdlib.h>

#include <filesystem>
#include <stdexcept>
#include <string>
#include <system_error>

#include "rnn_dist/util/error.h"

namespace rnn_dist {

// The message of the InputError f throws ("" and a test failure when it throws none).
// The message msg contains part.
#define EXPECT_HAS(msg, part) EXPECT_NE((msg).find(part), std::string::npos) << (msg)

template <class F>
std::string input_error(F&& f) {
  try {
    f();
  } catch (const InputError& e) {
    return e.what();
  }
  ADD_FAILURE() << "no InputError thrown";
  return "";
}

// A fresh directory under the system's temporary directory, removed with its contents at destruction.
class TempDir {
 public:
  TempDir() : path_((std::filesystem::temp_directory_path() / "rnn_dist_test_XXXXXX").string()) {
    if (!::mkdtemp(path_.data())) throw std::runtime_error("cannot create a temporary directory " + path_);
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

}  // namespace rnn_dist

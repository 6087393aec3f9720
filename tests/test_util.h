// Helpers shared by the GoogleTest files.
#pragma once

#include <gtest/gtest.h>

#include <string>

#include "rnn_dist/error.h"

namespace rnn_dist {

// The message of the InputError f throws ("" and a test failure when it throws none).
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

}  // namespace rnn_dist

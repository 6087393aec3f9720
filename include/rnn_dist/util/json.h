// Writing JSON: a string as a quoted, escaped JSON string (for names that come from user data).
#pragma once

#include <string>
#include <string_view>

namespace rnn_dist {

// "..." with ", \ and control characters escaped; the bytes are passed through otherwise (UTF-8 stays UTF-8).
std::string json_quote(std::string_view s);

}  // namespace rnn_dist

// Numbers as text: the shortest decimal form that reads back as the same value.
#pragma once

#include <charconv>
#include <string>

namespace rnn_dist {

// std::to_chars' shortest round-trip form: 0.002f is "0.002", not "0.00200000009" as a fixed precision
// prints it, and a double keeps every digit it needs. For JSON, help texts and messages.
template <class T>
std::string shortest(T v) {
  char buf[64];
  const auto r = std::to_chars(buf, buf + sizeof(buf), v);
  return std::string(buf, r.ptr);
}

}  // namespace rnn_dist

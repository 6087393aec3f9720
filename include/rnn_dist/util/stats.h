// Small summary statistics printed by rnn_prep and `rnn_dist info`.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace rnn_dist {

// Nearest-rank percentile p (0..100) of values; values need not be sorted. 0 for an empty input.
int64_t percentile(std::vector<int64_t> values, double p);

// "min A, p50 B, p90 C, p99 D, max E" of the values.
std::string length_summary(const std::vector<int64_t>& values);

}  // namespace rnn_dist
